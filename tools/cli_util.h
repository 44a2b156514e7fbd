// Small helpers shared by the CLI subcommands: option parsing, lists, JSON text, run metadata.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mla/mla.h"
#include "testing/inputs.h"

namespace mla::tools {

// Thrown by the parsers below; the subcommands catch it, print "mla <cmd>: <message>" and exit 2.
struct UsageError {
  std::string message;
};

// The start every subcommand shares: parse(argc, argv) into its Options (which have a `help` flag).
// Returns the exit status when the command is done already — 2 after printing "mla <cmd>:
// <message>" for a UsageError, 0 after printing `help_text` for --help — and nothing when it
// should go on.
template <class Options, class Parse>
std::optional<int> parse_command(const char* cmd, const char* help_text, int argc, char** argv, Parse parse,
                                 Options* o) {
  try {
    *o = parse(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "mla %s: %s\n", cmd, e.message.c_str());
    return 2;
  }
  if (o->help) {
    std::fputs(help_text, stdout);
    return 0;
  }
  return std::nullopt;
}

// Iterates argv[first..argc) as "--name value" or "--name=value" options.
class Args {
 public:
  Args(int argc, char** argv, int first);
  bool done() const { return i_ >= argc_; }
  // The next argument's option name ("--reps"); a positional argument is returned as is.
  std::string next();
  // The value of the option just returned by next() (the "=value" part or the following argument).
  std::string value();
  // For flags: an error when "--flag=value" was given.
  void no_value();

 private:
  int argc_;
  char** argv_;
  int i_;
  std::string name_;
  std::optional<std::string> inline_value_;
};

std::vector<std::string> split(const std::string& s, char sep);
// Appends `v` unless `list` holds it already: list options run each entry once, in first-seen order.
template <class T>
void append_unique(std::vector<T>& list, const T& v) {
  for (const T& x : list) {
    if (x == v) return;
  }
  list.push_back(v);
}
long long parse_int(const std::string& what, const std::string& text, long long lo, long long hi);
std::vector<KvFormat> parse_formats(const std::string& text);            // "bf16,fp8,mxfp4" (or "all")
std::vector<std::pair<int, int>> parse_shapes(const std::string& text);  // "4x1024,32x8192"
testing::Distribution parse_dist(const std::string& text);               // challenge | peaked
Backend parse_backend(const std::string& text);                          // cpu | cuda
const char* dist_name(testing::Distribution d);
// The value of `key` in describe()'s " key=value" fields ("" when absent, as on the cpu backend).
std::string plan_field(const std::string& description, const std::string& key);

// JSON text: a quoted, escaped string; a number (NaN/inf → null).
std::string json_str(const std::string& s);
std::string json_num(double v);
std::string json_int(long long v);

std::string iso_date_utc();   // "2026-11-29T15:04:05Z"
std::string git_commit();     // $MLA_COMMIT, else the source tree's HEAD (+ "-dirty"), else "unknown"
std::string host_cpu_name();  // /proc/cpuinfo "model name", else "unknown"

// Geometric mean of the positive finite values (NaN when there are none).
double geomean(const std::vector<double>& v);

}  // namespace mla::tools
