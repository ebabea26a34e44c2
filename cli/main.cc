// pipeplan: the command-line front end (cli/dispatch.cc).
#include "pipeplan/cli/main.h"

#include <string>
#include <vector>

#include "pipeplan/app/command.h"

int main(int argc, char** argv) {
  pipeplan::app::WriteStderrByLines();
  return pipeplan::cli::Main(std::vector<std::string>(argv + 1, argv + argc));
}
