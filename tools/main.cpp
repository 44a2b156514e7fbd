// The `mla` command line: bench, check and quantize.
#include <cstdio>
#include <cstring>
#include <string>

#include "commands.h"
#include "mla/mla.h"

#ifndef MLA_VERSION
#define MLA_VERSION "unknown"
#endif

namespace {

const char* kHelp = R"HELP(usage: mla <command> [options]

DeepSeek-R1 MLA decode kernels (16 heads, 576/512 latent, KV in bf16, fp8 or MXFP4).

commands:
  bench      speed suite of SPEC §4: correctness check, then call latency, device time and the
             streaming-read floor per case (cuda), or wall time (cpu)
  check      correctness sweep against the float64 reference over formats, distributions,
             layouts (uniform, ragged, paged 1/16/64, flat) and s_q
  quantize   quantize bf16 KV rows to fp8 or MXFP4 (the bit-exact formats of SPEC §2)

  mla <command> --help   options of a command
  mla --version          version and build

Backend: cuda when an sm_90 GPU is usable, else cpu; --backend cpu|cuda overrides.
)HELP";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kHelp, stderr);
    return 2;
  }
  const std::string cmd = argv[1];
  // Subcommands get argv from their own name on: argv[0] = "bench", argv[1..] = its options.
  if (cmd == "bench") return mla::tools::cmd_bench(argc - 1, argv + 1);
  if (cmd == "check") return mla::tools::cmd_check(argc - 1, argv + 1);
  if (cmd == "quantize") return mla::tools::cmd_quantize(argc - 1, argv + 1);
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::fputs(kHelp, stdout);
    return 0;
  }
  if (cmd == "--version" || cmd == "version") {
    std::printf("mla-decode %s (CUDA backend %s; GPU %s)\n", MLA_VERSION, MLA_WITH_CUDA ? "built" : "not built",
                mla::cuda_available() ? "usable" : "not usable");
    return 0;
  }
  std::fprintf(stderr, "mla: unknown command '%s'\n\n%s", cmd.c_str(), kHelp);
  return 2;
}
