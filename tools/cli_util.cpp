#include "cli_util.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <limits>
#include <sstream>

namespace mla::tools {

Args::Args(int argc, char** argv, int first) : argc_(argc), argv_(argv), i_(first) {}

std::string Args::next() {
  std::string a = argv_[i_++];
  inline_value_.reset();
  if (a.rfind("--", 0) == 0) {
    const auto eq = a.find('=');
    if (eq != std::string::npos) {
      inline_value_ = a.substr(eq + 1);
      a = a.substr(0, eq);
    }
  }
  name_ = a;
  return a;
}

std::string Args::value() {
  if (inline_value_) {
    std::string v = *inline_value_;
    inline_value_.reset();
    return v;
  }
  if (i_ >= argc_) throw UsageError{"option " + name_ + " needs a value"};
  return argv_[i_++];
}

void Args::no_value() {
  if (inline_value_) throw UsageError{"option " + name_ + " takes no value"};
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

long long parse_int(const std::string& what, const std::string& text, long long lo, long long hi) {
  if (text.empty()) throw UsageError{what + ": empty number"};
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0') throw UsageError{what + ": not an integer: '" + text + "'"};
  if (errno == ERANGE || v < lo || v > hi) {
    throw UsageError{what + ": " + text + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]"};
  }
  return v;
}

std::vector<KvFormat> parse_formats(const std::string& text) {
  if (text == "all") return {KvFormat::bf16, KvFormat::fp8, KvFormat::mxfp4};
  std::vector<KvFormat> out;
  for (const std::string& f : split(text, ',')) {
    if (f == "bf16") {
      append_unique(out, KvFormat::bf16);
    } else if (f == "fp8") {
      append_unique(out, KvFormat::fp8);
    } else if (f == "mxfp4") {
      append_unique(out, KvFormat::mxfp4);
    } else {
      throw UsageError{"--format: unknown format '" + f + "' (expected bf16, fp8, mxfp4 or all)"};
    }
  }
  return out;
}

std::vector<std::pair<int, int>> parse_shapes(const std::string& text) {
  std::vector<std::pair<int, int>> out;
  for (const std::string& s : split(text, ',')) {
    const auto x = s.find('x');
    if (x == std::string::npos) throw UsageError{"--shapes: '" + s + "' is not BATCHxKV (e.g. 32x8192)"};
    const int b = int(parse_int("--shapes batch", s.substr(0, x), 1, 1 << 20));
    const int kv = int(parse_int("--shapes kv length", s.substr(x + 1), 0, 1 << 24));
    append_unique(out, std::pair{b, kv});
  }
  return out;
}

testing::Distribution parse_dist(const std::string& text) {
  if (text == "challenge") return testing::Distribution::challenge;
  if (text == "peaked") return testing::Distribution::peaked;
  throw UsageError{"--dist: unknown distribution '" + text + "' (expected challenge or peaked)"};
}

Backend parse_backend(const std::string& text) {
  if (text == "cpu") return Backend::cpu;
  if (text == "cuda") return Backend::cuda;
  throw UsageError{"--backend: unknown backend '" + text + "' (expected cpu or cuda)"};
}

const char* dist_name(testing::Distribution d) {
  return d == testing::Distribution::peaked ? "peaked" : "challenge";
}

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        o += "\\\"";
        break;
      case '\\':
        o += "\\\\";
        break;
      case '\n':
        o += "\\n";
        break;
      case '\t':
        o += "\\t";
        break;
      case '\r':
        o += "\\r";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          o += buf;
        } else {
          o += char(c);
        }
    }
  }
  return o + "\"";
}

std::string json_num(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string json_int(long long v) {
  return std::to_string(v);
}

std::string iso_date_utc() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

namespace {
std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}
}  // namespace

// Asks git about the source tree this binary was built from (MLA_SOURCE_DIR), not about the
// working directory (another repository, or none) nor a GIT_DIR in the environment: its HEAD when
// this runs, with "-dirty" when tracked files differ from it. (A binary older than that HEAD is the
// caller's to rebuild; scripts/gpu_run.sh sets MLA_COMMIT.)
std::string git_commit() {
  if (const char* env = std::getenv("MLA_COMMIT"); env && *env) return env;
  std::string dir = "'";
  for (const char c : std::string(MLA_SOURCE_DIR)) dir += c == '\'' ? std::string("'\\''") : std::string(1, c);
  dir += "'";
  const std::string git = "env -u GIT_DIR -u GIT_WORK_TREE -u GIT_INDEX_FILE git -C " + dir;
  const std::string cmd =
      git + " rev-parse --short HEAD 2>/dev/null && { " + git + " diff --quiet HEAD -- 2>/dev/null || echo -dirty; }";
  std::string out;
  if (FILE* f = popen(cmd.c_str(), "r")) {
    char buf[128];
    while (std::fgets(buf, sizeof buf, f)) out += trim(buf);
    if (pclose(f) != 0) out.clear();
  }
  return out.empty() ? "unknown" : out;
}

std::string host_cpu_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto c = line.find(':');
      const auto v = c == std::string::npos ? c : line.find_first_not_of(' ', c + 1);
      if (v != std::string::npos) return trim(line.substr(v));
    }
  }
  return "unknown";
}

double geomean(const std::vector<double>& v) {
  double s = 0;
  int n = 0;
  for (double x : v) {
    if (std::isfinite(x) && x > 0) {
      s += std::log(x);
      ++n;
    }
  }
  return n ? std::exp(s / n) : std::numeric_limits<double>::quiet_NaN();
}

std::string plan_field(const std::string& description, const std::string& key) {
  const std::string tag = " " + key + "=";
  const std::size_t at = description.find(tag);
  if (at == std::string::npos) return "";
  const std::size_t from = at + tag.size();
  return description.substr(from, description.find(' ', from) - from);
}

}  // namespace mla::tools
