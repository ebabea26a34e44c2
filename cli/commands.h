// The pipeplan subcommands (one file each), dispatched by main.cc.
#pragma once

#include <string>
#include <vector>

namespace pipeplan::cli {

// The subcommands (one file each); `args` are the words after the subcommand's name.
int RunPlanCommand(const std::vector<std::string>& args);
int RunSimulateCommand(const std::vector<std::string>& args);
int RunExportCommand(const std::vector<std::string>& args);
int RunImportCommand(const std::vector<std::string>& args);
int RunCompareCommand(const std::vector<std::string>& args);
int RunDemoCommand(const std::vector<std::string>& args);
int RunRunCommand(const std::vector<std::string>& args);
int RunDiffCommand(const std::vector<std::string>& args);
int RunProfileCommand(const std::vector<std::string>& args);
int RunCalibrateCommand(const std::vector<std::string>& args);
int RunPartitionCommand(const std::vector<std::string>& args);

}  // namespace pipeplan::cli
