// Runs a fuzz target's entry point once on every file of the given files and directories, for
// builds without libFuzzer: the committed corpus (and every crash input added to it) replays as
// an ordinary test. A crash or a broken invariant aborts; no input at all is an error too.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

// The regular files at `path`: itself, or those in it (in name order, for a stable log).
std::vector<std::filesystem::path> InputsAt(const std::filesystem::path& path) {
  std::vector<std::filesystem::path> inputs;
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return {path};
  for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
    if (entry.is_regular_file()) inputs.push_back(entry.path());
  }
  std::sort(inputs.begin(), inputs.end());
  return inputs;
}

}  // namespace

int main(int argc, char** argv) {
  int replayed = 0;
  for (int i = 1; i < argc; ++i) {
    for (const std::filesystem::path& input : InputsAt(argv[i])) {
      std::ifstream in(input, std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "replay: cannot read '%s'\n", input.c_str());
        return 1;
      }
      const std::string data((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(data.data()), data.size());
      ++replayed;
    }
  }
  if (replayed == 0) {
    std::fprintf(stderr, "replay: no inputs (usage: %s FILE_OR_DIR...)\n", argv[0]);
    return 1;
  }
  std::printf("replay: %d inputs ran without a crash or a broken invariant\n", replayed);
  return 0;
}
