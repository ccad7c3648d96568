// mona-prepare-cmudict: reads cmu-pronouncing-dictionary's index.js and writes the
// grapheme-to-phoneme splits train.tsv / dev.tsv / test.tsv (see mona/data/cmudict.h).
//
//   mona-prepare-cmudict --input data/cache/cmu-pronouncing-dictionary-3.0.0/index.js
//                        --out-dir data/cache/g2p-cmudict [--examples N]
//
// Prints the parse report (lines kept, entry lines not kept per reason, with examples) and the
// words / pronunciations per split. Exit status: 0 on success, 1 on a data or file error,
// 2 on a usage error.
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>

#include "mona/core/error.h"
#include "mona/data/cmudict.h"

namespace {

void usage(std::ostream& os) {
  os << "usage: mona-prepare-cmudict --input INDEX_JS --out-dir DIR [--examples N]\n"
        "  --input INDEX_JS  index.js of cmu-pronouncing-dictionary@3.0.0\n"
        "                    (scripts/fetch-cmudict.sh prints its path)\n"
        "  --out-dir DIR     where train.tsv, dev.tsv and test.tsv are written (created if\n"
        "                    missing; files are replaced atomically)\n"
        "  --examples N      examples shown per reason in the report (default 5)\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::string input, out_dir;
  long examples = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> std::string {
      const std::string prefix = std::string(name) + "=";
      if (a.rfind(prefix, 0) == 0) return a.substr(prefix.size());
      if (i + 1 >= argc) {
        std::cerr << "mona-prepare-cmudict: " << name << " needs a value\n";
        usage(std::cerr);
        std::exit(2);
      }
      return argv[++i];
    };
    auto is = [&](const char* name) {
      return a == name || a.rfind(std::string(name) + "=", 0) == 0;
    };
    if (a == "-h" || a == "--help") {
      usage(std::cout);
      return 0;
    } else if (is("--input")) {
      input = value("--input");
    } else if (is("--out-dir")) {
      out_dir = value("--out-dir");
    } else if (is("--examples")) {
      const std::string v = value("--examples");
      char* end = nullptr;
      examples = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || examples < 0 || examples > 1000) {
        std::cerr << "mona-prepare-cmudict: --examples: expected an integer in [0, 1000], got '"
                  << v << "'\n";
        return 2;
      }
    } else {
      std::cerr << "mona-prepare-cmudict: unknown argument '" << a << "'\n";
      usage(std::cerr);
      return 2;
    }
  }
  if (input.empty() || out_dir.empty()) {
    std::cerr << "mona-prepare-cmudict: --input and --out-dir are required\n";
    usage(std::cerr);
    return 2;
  }

  try {
    using namespace mona::data;
    ParseReport report;
    report.max_examples = static_cast<std::size_t>(examples);
    const auto entries = load_cmudict_js(input, report);
    std::cout << report.to_string();
    const SplitCounts c = write_cmudict_splits(entries, out_dir);
    std::size_t words = 0, prons = 0;
    std::cout << "splits (fnv1a64(word) % 100: <90 train, <95 dev, else test) in " << out_dir
              << ":\n";
    for (std::size_t k = 0; k < kNumSplits; ++k) {
      std::cout << "  " << split_name(static_cast<Split>(k)) << ".tsv: " << c.words[k]
                << " words, " << c.pronunciations[k] << " pronunciations\n";
      words += c.words[k];
      prons += c.pronunciations[k];
    }
    std::cout << "  total: " << words << " words, " << prons << " pronunciations\n";
  } catch (const std::exception& e) {
    std::cerr << "mona-prepare-cmudict: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
