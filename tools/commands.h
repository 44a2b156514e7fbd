// Subcommands of the `mla` CLI; each returns the process exit code.
#pragma once

namespace mla::tools {

int cmd_bench(int argc, char** argv);     // tools/cmd_bench.cpp
int cmd_check(int argc, char** argv);     // tools/cmd_check.cpp
int cmd_quantize(int argc, char** argv);  // tools/cmd_quantize.cpp

}  // namespace mla::tools
