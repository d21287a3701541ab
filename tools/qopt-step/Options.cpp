//===- Options.cpp - qopt-step command line -------------------------------===//
#include "Options.h"

#include "Support.h"

#include <cerrno>
#include <cstdlib>
#include <iostream>
#include <sstream>

namespace qopt::step {

namespace {

const char *kUsage = R"(usage: qopt-step --kernel K --in FILE [--in FILE...] --out FILE [options]
       qopt-step --kernel K --describe [--backend B] [--kernels DIR]
       qopt-step --kernel K --make-example FILE --tensor NAME=SHAPE... [--seed S] [--no-state]

Steps every tensor of the inputs N times with one kernel (one launch per step)
and writes the new state to FILE. Tensors are named <tensor>/<stream> after the
kernel's streams (`qopt-step --kernel K --describe` lists them): e.g. wte/p,
wte/p.ecc, wte/g, wte/m.codes, wte/m.scales. The gradient <tensor>/g is used at
every step unless <tensor>/g@<step> (the step without leading zeros) gives that
step's own. Codebook tables are tensors named after them (m.qmap) or --table.
The output holds every read-write stream (parameter, error bits, states) and
the tables, not the gradients.

kernel:
  --kernel K            a spec name (flash_adamw), a kernel name (FlashAdamW),
                        or a <kernel>.manifest.json file
  --backend B           host (default) or cuda
  --device N            CUDA device ordinal (default 0)
  --kernels DIR         directory of kernels and their manifests: DIR/host
                        (host) or DIR/fatbin, DIR/ptx (cuda) when those hold
                        manifests, else DIR itself.
                        Default: $QOPT_KERNEL_DIR (one directory, or several
                        ':'-separated: the first that holds the kernel), else,
                        for cuda, the shipped kernels of libqopt_kernels.so,
                        else <bin>/../kernels
step:
  --steps N             number of steps (default 1; 0 only writes the state)
  --step-start K        the step count of the first step, as the spec's `step`
                        sees it (default 1): steps K .. K+N-1 run
  --hyper NAME=VALUE    a hyperparameter (repeatable; a decimal number, true/false for flags);
                        those not given take the manifest's default
  --table NAME=SRC      codebook table NAME (e.g. m.qmap) from SRC:
                        dynamic-signed, dynamic-unsigned (bitsandbytes'
                        create_dynamic_map), or FILE[:TENSOR] (256 F32 values)
  --init-missing-state  start state streams (and error bits) missing from the
                        inputs at their initial value (zero state)
files:
  --in FILE             a safetensors input (repeatable; a name may be in one
                        file only)
  --out FILE            the safetensors output (may be an input); written only
                        when everything succeeded, replacing a regular file
                        only (a device or FIFO is refused)
other:
  --describe            print the kernel's streams, hyperparameters and tables
  --make-example FILE   write an example input for the kernel: a random master
                        weight 0.5*N(0,1) split into its streams, a gradient
                        0.01*N(0,1) and the initial state of each --tensor
  --tensor NAME=SHAPE   a tensor of --make-example, e.g. wte=64x32 or b=100
  --seed S              random seed of --make-example (default 1)
  --no-state            --make-example writes no state streams
  -q, --quiet           no summary line
  -h, --help            this text
)";

int64_t parseInt(const std::string &option, const std::string &text, int64_t min) {
  errno = 0;
  char *end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end || errno == ERANGE)
    usage(option, ": '", text, "' is not an integer");
  if (v < min)
    usage(option, ": ", v, " is below ", min);
  return v;
}

std::pair<std::string, std::string> splitAssign(const std::string &option,
                                                const std::string &text) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    usage(option, " ", text, ": expected NAME=VALUE");
  return {text.substr(0, eq), text.substr(eq + 1)};
}

} // namespace

Options parseArgs(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string name = arg, value;
    bool hasValue = false;
    if (arg.rfind("--", 0) == 0) {
      size_t eq = arg.find('=');
      if (eq != std::string::npos) {
        name = arg.substr(0, eq);
        value = arg.substr(eq + 1);
        hasValue = true;
      }
    }
    auto takeValue = [&]() -> std::string {
      if (hasValue)
        return value;
      if (i + 1 >= argc)
        usage(name, " needs a value");
      return argv[++i];
    };
    auto noValue = [&] {
      if (hasValue)
        usage(name, " takes no value");
    };
    if (name == "-h" || name == "--help") {
      std::cout << kUsage;
      std::exit(0);
    } else if (name == "-q" || name == "--quiet") {
      noValue();
      o.quiet = true;
    } else if (name == "--kernel") {
      o.kernel = takeValue();
    } else if (name == "--backend") {
      std::string b = takeValue();
      if (b == "host")
        o.backend = QOPT_BACKEND_HOST;
      else if (b == "cuda")
        o.backend = QOPT_BACKEND_CUDA;
      else
        usage("--backend: unknown backend '", b, "' (host or cuda)");
    } else if (name == "--device") {
      o.device = static_cast<int32_t>(parseInt(name, takeValue(), 0));
    } else if (name == "--kernels") {
      o.kernelsDir = takeValue();
      if (o.kernelsDir.empty())
        usage("--kernels: empty directory name");
    } else if (name == "--steps") {
      o.steps = parseInt(name, takeValue(), 0);
    } else if (name == "--step-start") {
      o.stepStart = parseInt(name, takeValue(), 1);
    } else if (name == "--hyper") {
      o.hypers.push_back(splitAssign(name, takeValue()));
    } else if (name == "--table") {
      o.tables.push_back(splitAssign(name, takeValue()));
    } else if (name == "--init-missing-state") {
      noValue();
      o.initMissingState = true;
    } else if (name == "--in") {
      o.inputs.push_back(takeValue());
    } else if (name == "--out") {
      if (!o.output.empty())
        usage("--out given twice");
      o.output = takeValue();
    } else if (name == "--describe") {
      noValue();
      o.describe = true;
    } else if (name == "--make-example") {
      o.makeExample = takeValue();
    } else if (name == "--tensor") {
      auto [tname, shapeText] = splitAssign(name, takeValue());
      // Dimensions separated by 'x', each one written: `3x` and `x3` are
      // mistakes, not [3].
      std::vector<int64_t> shape;
      if (shapeText.empty())
        usage("--tensor ", tname, ": empty shape");
      for (size_t begin = 0;;) {
        size_t x = shapeText.find('x', begin);
        std::string dim = shapeText.substr(begin, x == std::string::npos ? x : x - begin);
        if (dim.empty())
          usage("--tensor ", tname, "=", shapeText,
                ": a dimension is missing (write the shape as 4x8)");
        shape.push_back(parseInt("--tensor " + tname, dim, 0));
        if (x == std::string::npos)
          break;
        begin = x + 1;
      }
      for (const auto &[given, givenShape] : o.exampleTensors)
        if (given == tname)
          usage("--tensor ", tname, " given twice");
      o.exampleTensors.emplace_back(tname, shape);
    } else if (name == "--seed") {
      o.seed = static_cast<uint64_t>(parseInt(name, takeValue(), 0));
    } else if (name == "--no-state") {
      noValue();
      o.noState = true;
    } else {
      usage("unknown option '", arg, "'");
    }
  }
  if (o.kernel.empty())
    usage("--kernel is required");
  if (o.describe)
    return o;
  if (!o.makeExample.empty()) {
    if (o.exampleTensors.empty())
      usage("--make-example needs at least one --tensor NAME=SHAPE");
    return o;
  }
  if (o.inputs.empty())
    usage("at least one --in FILE is required");
  if (o.output.empty())
    usage("--out FILE is required");
  if (o.stepStart > INT64_MAX - o.steps)
    usage("--step-start + --steps overflows");
  return o;
}

} // namespace qopt::step
