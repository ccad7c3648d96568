#include "mona/io/yaml.h"

#include <gtest/gtest.h>

#include "mona/core/error.h"
#include "util/temp_dir.h"

using mona::test::TempDir;
using mona::io::apply_override;
using mona::io::parse_yaml;

namespace {

const char* kConfig =
    "model:\n"
    "  attention: {type: mocha, chunk: 4}\n"
    "  layers: [{size: 128}, {size: 64}]\n"
    "optim:\n"
    "  lr: 0.001\n";

}  // namespace

TEST(ConfigIo, LoadAndSaveRoundTrip) {
  TempDir dir;
  const std::string path = dir.file("cfg.yaml");
  mona::test::write_raw(path, kConfig);
  YAML::Node root = mona::io::load_yaml(path);
  EXPECT_EQ(root["model"]["attention"]["type"].as<std::string>(), "mocha");
  EXPECT_EQ(root["optim"]["lr"].as<double>(), 0.001);
  const std::string out = dir.file("effective.yaml");
  mona::io::save_yaml_atomic(out, root);
  const YAML::Node back = mona::io::load_yaml(out);
  EXPECT_EQ(back["model"]["attention"]["chunk"].as<int>(), 4);
  EXPECT_EQ(back["model"]["layers"][1]["size"].as<int>(), 64);
  EXPECT_EQ(mona::io::to_yaml_text(back), mona::io::to_yaml_text(root));
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"cfg.yaml", "effective.yaml"}));
}

TEST(ConfigIo, LoadErrorsNameFileAndLine) {
  TempDir dir;
  const std::string path = dir.file("bad.yaml");
  mona::test::write_raw(path, "a: 1\nb: [1, 2\nc: 3\n");
  EXPECT_ERROR_CONTAINS(mona::io::load_yaml(path), path + ":", "YAML parse error");
  mona::test::write_raw(path, "a: 1\n  b: 2\n");
  EXPECT_ERROR_CONTAINS(mona::io::load_yaml(path), path + ":2:", "YAML parse error");
  EXPECT_ERROR_CONTAINS(mona::io::load_yaml(dir.file("none.yaml")), dir.file("none.yaml"));
  mona::test::write_raw(path, "");
  EXPECT_TRUE(mona::io::load_yaml(path).IsNull());
  // A second document was dropped unread (its settings neither applied nor checked).
  mona::test::write_raw(path, "train: {batch_size: 4}\n---\ntrain: {batch_size: -5}\n");
  EXPECT_ERROR_CONTAINS(mona::io::load_yaml(path), path + ": expected one YAML document, found 2");
}

TEST(ConfigIo, KeysGivenTwiceAreRefused) {
  // yaml-cpp keeps both entries and finds the first: a value appended at the end of a file
  // was ignored without a word.
  EXPECT_ERROR_CONTAINS(parse_yaml("train:\n  batch_size: 64\n  seed: 1\n  batch_size: 32\n", "c5.yaml"),
                        "c5.yaml:4: duplicate key \"train.batch_size\" (first on line 2)");
  EXPECT_ERROR_CONTAINS(parse_yaml("train: {seed: 1}\nmodel: {}\ntrain: {batch_size: 3}\n", "c3.yaml"),
                        "c3.yaml:3: duplicate key \"train\" (first on line 1)");
  EXPECT_ERROR_CONTAINS(parse_yaml("layers: [{size: 1, size: 2}]\n", "l.yaml"), "duplicate key \"layers[0].size\"");
  // The same key in different maps is no duplicate.
  EXPECT_EQ(parse_yaml("a: {x: 1}\nb: {x: 2}\n", "ok.yaml")["b"]["x"].as<int>(), 2);
}

TEST(ConfigIo, OverrideOverwritesNestedKey) {
  YAML::Node root = parse_yaml(kConfig, "cfg");
  apply_override(root, "optim.lr=0.0005");
  apply_override(root, "model.attention.type=gmm");
  EXPECT_EQ(root["optim"]["lr"].as<double>(), 0.0005);
  EXPECT_EQ(root["model"]["attention"]["type"].as<std::string>(), "gmm");
  EXPECT_EQ(root["model"]["attention"]["chunk"].as<int>(), 4);  // siblings untouched
  EXPECT_EQ(root["model"]["layers"].size(), 2u);
}

TEST(ConfigIo, OverrideCreatesMissingMaps) {
  YAML::Node root = parse_yaml(kConfig, "cfg");
  apply_override(root, "data.extra.flag=true");
  apply_override(root, "seed=7");
  EXPECT_TRUE(root["data"]["extra"]["flag"].as<bool>());
  EXPECT_EQ(root["seed"].as<int>(), 7);
  EXPECT_EQ(root["optim"]["lr"].as<double>(), 0.001);
  YAML::Node empty;  // Null root becomes a map
  apply_override(empty, "a.b=1");
  EXPECT_EQ(empty["a"]["b"].as<int>(), 1);
}

TEST(ConfigIo, OverrideValuesAreYaml) {
  YAML::Node root = parse_yaml(kConfig, "cfg");
  apply_override(root, "train.buckets=[10, 20, 40]");
  apply_override(root, "model.attention={type: hard}");
  apply_override(root, "name=\"a b=c\"");
  apply_override(root, "model.layers.1.size=256");
  apply_override(root, " optim.eps = 1e-8 ");
  ASSERT_TRUE(root["train"]["buckets"].IsSequence());
  EXPECT_EQ(root["train"]["buckets"][2].as<int>(), 40);
  EXPECT_EQ(root["model"]["attention"]["type"].as<std::string>(), "hard");
  // A map over a map is merged key by key: the file's other keys stay (replacing the map
  // whole reset them to their defaults without a word).
  EXPECT_TRUE(root["model"]["attention"]["chunk"].IsDefined());
  EXPECT_EQ(root["model"]["attention"]["chunk"].as<int>(), 4);
  // ... and so on down; a scalar (null included) over a map replaces it.
  apply_override(root, "model={attention: {chunk: 8}, extra: 1}");
  EXPECT_EQ(root["model"]["attention"]["chunk"].as<int>(), 8);
  EXPECT_EQ(root["model"]["attention"]["type"].as<std::string>(), "hard");
  EXPECT_EQ(root["model"]["extra"].as<int>(), 1);
  EXPECT_EQ(root["name"].as<std::string>(), "a b=c");
  EXPECT_EQ(root["model"]["layers"][1]["size"].as<int>(), 256);
  EXPECT_EQ(root["model"]["layers"][0]["size"].as<int>(), 128);
  EXPECT_EQ(root["optim"]["eps"].as<double>(), 1e-8);
  apply_override(root, "optim=null");
  EXPECT_TRUE(root["optim"].IsNull());
}

TEST(ConfigIo, MalformedOverridesNameTheAssignment) {
  YAML::Node root = parse_yaml(kConfig, "cfg");
  const std::string before = mona::io::to_yaml_text(root);
  EXPECT_ERROR_CONTAINS(apply_override(root, "optim.lr"), "\"optim.lr\"", "no '='");
  // The example given is the key the user wrote, not a key of another subcommand.
  EXPECT_ERROR_CONTAINS(apply_override(root, "decode.beam"), "expected key=value (e.g. decode.beam=VALUE)");
  EXPECT_ERROR_CONTAINS(apply_override(root, "=3"), "\"=3\"", "empty key");
  EXPECT_ERROR_CONTAINS(apply_override(root, "optim..lr=3"), "\"optim..lr=3\"",
                        "empty component");
  EXPECT_ERROR_CONTAINS(apply_override(root, ".lr=3"), "empty component");
  EXPECT_ERROR_CONTAINS(apply_override(root, "optim.lr="), "\"optim.lr=\"", "empty value");
  EXPECT_ERROR_CONTAINS(apply_override(root, "optim.lr=[1, 2"), "\"optim.lr=[1, 2\"",
                        "not valid YAML");
  EXPECT_ERROR_CONTAINS(apply_override(root, "optim.lr.x=1"), "\"optim.lr.x=1\"",
                        "\"optim.lr\" is a scalar");
  EXPECT_ERROR_CONTAINS(apply_override(root, "model.layers.5.size=1"), "index 5 out of range");
  EXPECT_ERROR_CONTAINS(apply_override(root, "model.layers.x=1"), "\"model.layers\" is a sequence");
  EXPECT_EQ(mona::io::to_yaml_text(root), before);  // nothing changed
}
