// The pipeplan command as a function, so that it runs in the process that calls it: the
// `pipeplan` executable and the Python package's console script (python/) are the same
// command. Output goes to the process's standard output and error.
#pragma once

#include <string>
#include <vector>

namespace pipeplan::cli {

// Runs `pipeplan WORDS...` (the words after the program's name) and returns its exit code:
// 0 success, 1 invalid input, 2 usage error (pipeplan --help).
int Main(const std::vector<std::string>& words);

}  // namespace pipeplan::cli
