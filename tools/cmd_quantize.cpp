// `mla quantize`: raw bf16 KV rows → the fp8 or MXFP4 format of SPEC §2 (docs/formats.md).
//
// Outputs are written to temporary files next to their destinations and renamed into place only
// when everything succeeded; on any failure the temporaries are removed and no output is left.
#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <new>
#include <random>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "cli_util.h"
#include "commands.h"
#include "mla/mla.h"
#include "mla/quantize.h"

namespace mla::tools {
namespace {

const char* kQuantizeHelp = R"(usage: mla quantize --format fp8|mxfp4 [--rounding rne|legacy] [--scale-stride 18|24]
                    --rows N --in FILE --out DATA --scales SCALES

Quantizes N rows of 576 bf16 values (raw little-endian, N x 1152 bytes; the file must hold exactly
that much) to a KV-cache format of SPEC §2 (bit-exact; see docs/formats.md):

  fp8     sglang scaled_fp8_quant, one scale per tensor. DATA: N x 576 e4m3fn bytes.
          SCALES: the fp32 scale, 4 bytes little-endian (value = e4m3 * scale).
  mxfp4   aiter dynamic_mxfp4_quant, one E8M0 scale per 32 values. DATA: N x 288 bytes (two E2M1
          codes per byte, low nibble = even element). SCALES: N x stride E8M0 bytes, columns
          18..stride-1 are 0x00.

options:
  --format fp8|mxfp4       required
  --rounding rne|legacy    mxfp4 only: E2M1 ties to even (default, aiter >= 0.1.12) or away from
                           zero (aiter <= 0.1.11)
  --scale-stride 18|24     mxfp4 only: bytes per row of SCALES (default 18; 24 as aiter <= 0.1.11)
  --rows N                 required, N >= 1
  --in FILE                required, the bf16 input
  --out DATA               required, the quantized data
  --scales SCALES          required, the scale(s)
  --help                   this text

Exit status: 0 done; 2 bad arguments; 1 input/output error (missing, short or long input file,
unwritable output). On failure no output file is left behind.
NaN in the input: fp8 gives scale NaN and every byte 0x7F; mxfp4 gives the block scale 0xFF.
Inf: fp8 gives scale inf; mxfp4 gives scale 254 and code +-6. A warning says so on stderr.
)";

struct Options {
  bool help = false;
  std::string format, rounding, in, out, scales;
  long long rows = 0;
  long long stride = 0;
  bool have_rows = false, have_stride = false;
};

// A runtime failure (exit status 1), as opposed to a UsageError (2).
struct IoError {
  std::string message;
};

Options parse(int argc, char** argv) {
  Options o;
  Args a(argc, argv, 1);
  std::vector<std::string> seen;
  auto once = [&seen](const std::string& k) {
    if (std::find(seen.begin(), seen.end(), k) != seen.end()) throw UsageError{"option " + k + " given twice"};
    seen.push_back(k);
  };
  while (!a.done()) {
    const std::string k = a.next();
    if (k == "--help" || k == "-h") {
      a.no_value();
      o.help = true;
    } else if (k == "--format") {
      once(k);
      o.format = a.value();
      if (o.format != "fp8" && o.format != "mxfp4")
        throw UsageError{"--format: unknown format '" + o.format + "' (expected fp8 or mxfp4)"};
    } else if (k == "--rounding") {
      once(k);
      o.rounding = a.value();
      if (o.rounding != "rne" && o.rounding != "legacy")
        throw UsageError{"--rounding: unknown rounding '" + o.rounding + "' (expected rne or legacy)"};
    } else if (k == "--scale-stride") {
      once(k);
      o.stride = parse_int("--scale-stride", a.value(), 18, 24);
      if (o.stride != 18 && o.stride != 24) throw UsageError{"--scale-stride: expected 18 or 24"};
      o.have_stride = true;
    } else if (k == "--rows") {
      once(k);
      o.rows = parse_int("--rows", a.value(), 1, std::numeric_limits<std::int64_t>::max() / (2 * kHeadDim));
      o.have_rows = true;
    } else if (k == "--in") {
      once(k);
      o.in = a.value();
    } else if (k == "--out") {
      once(k);
      o.out = a.value();
    } else if (k == "--scales") {
      once(k);
      o.scales = a.value();
    } else if (k.rfind("-", 0) == 0) {
      throw UsageError{"unknown option '" + k + "' (see mla quantize --help)"};
    } else {
      throw UsageError{"unexpected argument '" + k + "' (see mla quantize --help)"};
    }
  }
  if (o.help) return o;
  if (o.format.empty()) throw UsageError{"--format is required (fp8 or mxfp4)"};
  if (!o.have_rows) throw UsageError{"--rows is required"};
  if (o.in.empty()) throw UsageError{"--in is required"};
  if (o.out.empty()) throw UsageError{"--out is required"};
  if (o.scales.empty()) throw UsageError{"--scales is required"};
  if (o.format == "fp8" && !o.rounding.empty()) throw UsageError{"--rounding applies to --format mxfp4 only"};
  if (o.format == "fp8" && o.have_stride) throw UsageError{"--scale-stride applies to --format mxfp4 only"};
  if (o.rounding.empty()) o.rounding = "rne";
  if (!o.have_stride) o.stride = kMxfp4ScalesPerRow;

  namespace fs = std::filesystem;
  auto same = [](const std::string& a, const std::string& b) {
    std::error_code ec1, ec2;
    const fs::path pa = fs::weakly_canonical(a, ec1), pb = fs::weakly_canonical(b, ec2);
    if (ec1 || ec2) return a == b;
    return pa == pb;
  };
  if (same(o.out, o.scales)) throw UsageError{"--out and --scales name the same file"};
  // A directory cannot be replaced by the output's rename; refuse it before anything is written (a
  // later rename failing would otherwise have to remove the other, already renamed, output).
  for (const auto& [name, path] :
       {std::pair<const char*, const std::string&>{"--out", o.out}, {"--scales", o.scales}}) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) throw UsageError{std::string(name) + ": '" + path + "' is a directory"};
  }
  if (same(o.in, o.out) || same(o.in, o.scales)) throw UsageError{"--in must differ from --out and --scales"};
  return o;
}

// Reads exactly rows × 576 bf16 values; a shorter or longer file is an error.
std::vector<std::uint16_t> read_input(const std::string& path, std::int64_t rows) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw IoError{"cannot open input '" + path + "': " + std::strerror(errno)};
  const std::int64_t want_bytes = rows * kHeadDim * 2;
  const std::string expect =
      "expected --rows " + std::to_string(rows) + " x 576 bf16 = " + std::to_string(want_bytes) + " bytes";
  // A regular file's size is checked before allocating (pipes and devices are checked by reading).
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) {
    const std::uintmax_t size = std::filesystem::file_size(path, ec);
    if (!ec && size != static_cast<std::uintmax_t>(want_bytes)) {
      std::fclose(f);
      throw IoError{"input '" + path + "' is " + (size < std::uintmax_t(want_bytes) ? "too short" : "too long") + ": " +
                    std::to_string(size) + " bytes, " + expect};
    }
  }
  std::vector<std::uint16_t> x;
  try {
    x.resize(static_cast<std::size_t>(rows * kHeadDim));
  } catch (const std::bad_alloc&) {
    std::fclose(f);
    throw IoError{"cannot allocate " + std::to_string(want_bytes) + " bytes for the input"};
  }
  const std::size_t got = std::fread(x.data(), 1, static_cast<std::size_t>(want_bytes), f);
  const bool read_error = std::ferror(f) != 0;
  unsigned char extra;
  const bool longer = !read_error && got == static_cast<std::size_t>(want_bytes) && std::fread(&extra, 1, 1, f) == 1;
  std::fclose(f);
  if (read_error) throw IoError{"read error on input '" + path + "'"};
  if (got != static_cast<std::size_t>(want_bytes)) {
    throw IoError{"input '" + path + "' is too short: " + std::to_string(got) + " bytes, " + expect};
  }
  if (longer) throw IoError{"input '" + path + "' is too long: " + expect};
  if constexpr (std::endian::native == std::endian::big) {
    for (auto& v : x) v = std::uint16_t((v >> 8) | (v << 8));
  }
  return x;
}

// Temporary output files, renamed into place by commit() and removed otherwise.
class Outputs {
 public:
  Outputs() = default;
  Outputs(const Outputs&) = delete;
  Outputs& operator=(const Outputs&) = delete;
  ~Outputs() {
    for (auto& e : entries_) {
      if (e.file) std::fclose(e.file);
      if (!e.tmp.empty()) std::remove(e.tmp.c_str());
    }
    for (auto& d : committed_) std::remove(d.c_str());  // only on a failed commit
  }

  // Creates a fresh temporary file beside `dest` and writes `bytes` to it.
  void write(const std::string& dest, const void* bytes, std::size_t n) {
    Entry e;
    e.dest = dest;
    std::random_device rd;
    for (int attempt = 0; attempt < 100 && !e.file; ++attempt) {
      char suffix[32];
      std::snprintf(suffix, sizeof suffix, ".tmp%08x", unsigned(rd()));
      e.tmp = dest + suffix;
      e.file = std::fopen(e.tmp.c_str(), "wbx");  // exclusive: never clobbers another file
      if (!e.file && errno != EEXIST) break;
    }
    if (!e.file) {
      const std::string why = std::strerror(errno);
      e.tmp.clear();
      throw IoError{"cannot create a file beside '" + dest + "': " + why};
    }
    entries_.push_back(e);
    Entry& w = entries_.back();
    const bool ok = n == 0 || std::fwrite(bytes, 1, n, w.file) == n;
    const bool flushed = std::fflush(w.file) == 0;
    const int closed = std::fclose(w.file);
    w.file = nullptr;
    if (!ok || !flushed || closed != 0) throw IoError{"cannot write '" + w.tmp + "': " + std::strerror(errno)};
  }

  // Renames every temporary into place. If a later rename fails, outputs already renamed are
  // removed again (by the destructor).
  void commit() {
    for (auto& e : entries_) {
      if (std::rename(e.tmp.c_str(), e.dest.c_str()) != 0) {
        throw IoError{"cannot rename '" + e.tmp + "' to '" + e.dest + "': " + std::strerror(errno)};
      }
      e.tmp.clear();
      committed_.push_back(e.dest);
    }
    committed_.clear();
  }

 private:
  struct Entry {
    std::string dest, tmp;
    std::FILE* file = nullptr;
  };
  std::vector<Entry> entries_;
  std::vector<std::string> committed_;
};

std::string hex32(std::uint32_t u) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08X", u);
  return buf;
}

int run_quantize(const Options& o) {
  const std::vector<std::uint16_t> x = read_input(o.in, o.rows);
  Outputs outputs;
  if (o.format == "fp8") {
    const Fp8Quantized q = quantize_fp8(x);
    std::uint32_t bits;
    std::memcpy(&bits, &q.scale, 4);
    unsigned char le[4] = {static_cast<unsigned char>(bits), static_cast<unsigned char>(bits >> 8),
                           static_cast<unsigned char>(bits >> 16), static_cast<unsigned char>(bits >> 24)};
    if (!std::isfinite(q.scale)) {
      std::fprintf(stderr, "mla quantize: warning: the input holds %s; the fp8 scale is %s\n",
                   std::isnan(q.scale) ? "NaN" : "an infinity", std::isnan(q.scale) ? "NaN" : "inf");
    }
    outputs.write(o.out, q.bytes.data(), q.bytes.size());
    outputs.write(o.scales, le, 4);
    outputs.commit();
    std::printf("mla quantize: fp8, %lld rows, scale %.9g (%s) -> %s (%zu bytes), %s (4 bytes)\n", o.rows,
                double(q.scale), hex32(bits).c_str(), o.out.c_str(), q.bytes.size(), o.scales.c_str());
    return 0;
  }
  const Mxfp4Rounding rounding = o.rounding == "legacy" ? Mxfp4Rounding::legacy : Mxfp4Rounding::rne;
  Mxfp4Quantized q;
  const Status s = quantize_mxfp4(x, o.rows, rounding, o.stride, &q);
  if (!s.ok()) throw IoError{s.message};
  std::int64_t nan_blocks = 0, inf_blocks = 0;
  for (std::int64_t r = 0; r < o.rows; ++r) {
    for (int k = 0; k < kMxfp4ScalesPerRow; ++k) {
      const std::uint8_t sb = q.scales[static_cast<std::size_t>(r * o.stride + k)];
      nan_blocks += sb == 0xFF;
      inf_blocks += sb == 254;
    }
  }
  if (nan_blocks > 0) {
    std::fprintf(stderr, "mla quantize: warning: %lld block(s) hold NaN; their scale byte is 0xFF (NaN)\n",
                 static_cast<long long>(nan_blocks));
  }
  if (inf_blocks > 0) {
    std::fprintf(stderr,
                 "mla quantize: warning: %lld block(s) hold an infinity or values >= 1.75 * 2^127 (scale byte 254); "
                 "some of their values decode to inf\n",
                 static_cast<long long>(inf_blocks));
  }
  outputs.write(o.out, q.data.data(), q.data.size());
  outputs.write(o.scales, q.scales.data(), q.scales.size());
  outputs.commit();
  std::printf("mla quantize: mxfp4 (%s rounding, scale stride %lld), %lld rows -> %s (%zu bytes), %s (%zu bytes)\n",
              o.rounding.c_str(), o.stride, o.rows, o.out.c_str(), q.data.size(), o.scales.c_str(), q.scales.size());
  return 0;
}

}  // namespace

int cmd_quantize(int argc, char** argv) {
  Options o;
  if (const std::optional<int> done = parse_command("quantize", kQuantizeHelp, argc, argv, parse, &o)) return *done;
  try {
    return run_quantize(o);
  } catch (const IoError& e) {
    std::fprintf(stderr, "mla quantize: %s\n", e.message.c_str());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "mla quantize: out of memory\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mla quantize: %s\n", e.what());
  }
  return 1;
}

}  // namespace mla::tools
