#include "harness/safetensors.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "harness/check.h"

namespace cnnbench {
namespace {

using testing::HasSubstr;

std::string temp_path(const std::string& name) {
  return testing::TempDir() + "cnnbench_st_" + name + ".safetensors";
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

// A file image: the length prefix, `header` verbatim, then `data`.
std::vector<uint8_t> image(const std::string& header, const std::vector<uint8_t>& data = {}) {
  std::vector<uint8_t> bytes(8);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) bytes[i] = uint8_t(n >> (8 * i));
  for (char ch : header) bytes.push_back(uint8_t(ch));  // insert() of an empty one warns (GCC 12)
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}

// Writes the image to a temp file, loads it and returns the UserError message ("" if none).
std::string load_error(const std::string& name, const std::vector<uint8_t>& bytes) {
  write_bytes(temp_path(name), bytes);
  try {
    SafetensorsFile::load(temp_path(name));
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

std::vector<uint8_t> u16_data(const std::vector<uint16_t>& values) {
  std::vector<uint8_t> out;
  for (uint16_t v : values) out.insert(out.end(), {uint8_t(v & 0xFF), uint8_t(v >> 8)});
  return out;
}

TEST(Safetensors, RoundTripWithScalarAndMetadata) {
  const std::string path = temp_path("roundtrip");
  std::vector<SafetensorOut> out{{"conv1.weight", {2, 1, 3, 1}, {1, -2, 3.5f, 0, 1e-30f, -7}},
                                 {"bn.num_batches", {}, {42}},
                                 {"empty", {0, 4}, {}},
                                 {"a.bias", {3}, {0.25f, 0.5f, 0.75f}}};
  save_safetensors(path, out, {{"format", "pt"}, {"source", "test"}});

  std::ifstream in(path, std::ios::binary);
  uint64_t header_len = 0;
  in.read(reinterpret_cast<char*>(&header_len), 8);
  EXPECT_EQ(header_len % 8, 0u);

  SafetensorsFile f = SafetensorsFile::load(path);
  EXPECT_EQ(f.source(), path);
  EXPECT_EQ(f.tensors().size(), 4u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.metadata().at("source"), "test");
  for (const SafetensorOut& t : out) {
    ASSERT_TRUE(f.has(t.name)) << t.name;
    EXPECT_EQ(f.info(t.name).dtype, "F32");
    EXPECT_EQ(f.info(t.name).shape, t.shape);
    EXPECT_EQ(f.info(t.name).numel(), int64_t(t.values.size()));
    EXPECT_EQ(f.to_float(t.name), t.values) << t.name;
  }
  EXPECT_EQ(f.info("bn.num_batches").numel(), 1);
  EXPECT_FALSE(f.has("__metadata__"));

  save_safetensors(path, {{"x", {1}, {3}}});
  EXPECT_TRUE(SafetensorsFile::load(path).metadata().empty());
}

TEST(Safetensors, HalfConversionIsExact) {
  const std::vector<uint16_t> bits{0x3C00, 0xC100, 0x7BFF, 0x0001, 0x03FF, 0x0400,
                                   0x7C00, 0xFC00, 0x8000, 0x0000, 0x7E00};
  auto f = SafetensorsFile::parse(
      image(R"({"h":{"dtype":"F16","shape":[11],"data_offsets":[0,22]}})", u16_data(bits)), "h");
  std::vector<float> v = f.to_float("h");
  ASSERT_EQ(v.size(), 11u);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], -2.5f);
  EXPECT_EQ(v[2], 65504.0f);
  EXPECT_EQ(v[3], std::ldexp(1.0f, -24));
  EXPECT_EQ(v[4], std::ldexp(1023.0f, -24));
  EXPECT_EQ(v[5], std::ldexp(1.0f, -14));
  EXPECT_EQ(v[6], std::numeric_limits<float>::infinity());
  EXPECT_EQ(v[7], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(v[8], 0.0f);
  EXPECT_TRUE(std::signbit(v[8]));
  EXPECT_FALSE(std::signbit(v[9]));
  EXPECT_TRUE(std::isnan(v[10]));
}

TEST(Safetensors, Bfloat16AndDoubleConversionIsExact) {
  const std::vector<uint16_t> bits{0x3F80, 0xC020, 0x477F, 0x3380, 0x0001, 0x7F80, 0xFF80, 0x7FC0};
  auto f = SafetensorsFile::parse(
      image(R"({"b":{"dtype":"BF16","shape":[2,4],"data_offsets":[0,16]}})", u16_data(bits)), "b");
  std::vector<float> v = f.to_float("b");
  ASSERT_EQ(v.size(), 8u);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], -2.5f);
  EXPECT_EQ(v[2], 65280.0f);
  EXPECT_EQ(v[3], std::ldexp(1.0f, -24));
  EXPECT_EQ(v[4], std::ldexp(1.0f, -133));
  EXPECT_EQ(v[5], std::numeric_limits<float>::infinity());
  EXPECT_EQ(v[6], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(v[7]));

  const double d[2] = {-2.5, 65504.0};
  std::vector<uint8_t> data(16);
  std::memcpy(data.data(), d, 16);
  auto g = SafetensorsFile::parse(
      image(R"({"d":{"dtype":"F64","shape":[2],"data_offsets":[0,16]}})", data), "d");
  EXPECT_EQ(g.to_float("d"), (std::vector<float>{-2.5f, 65504.0f}));
}

TEST(Safetensors, FileErrorsNameTheFile) {
  const std::string missing = temp_path("does_not_exist");
  try {
    SafetensorsFile::load(missing);
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr(missing));
    EXPECT_THAT(e.what(), HasSubstr("does not exist"));
  }
  EXPECT_THROW(SafetensorsFile::load(testing::TempDir()), UserError);

  std::string msg = load_error("short", {1, 0, 0});
  EXPECT_THAT(msg, HasSubstr(temp_path("short")));
  EXPECT_THAT(msg, HasSubstr("shorter than 8 bytes"));

  std::vector<uint8_t> long_header = image("{}");
  long_header[0] = 200;
  msg = load_error("long_header", long_header);
  EXPECT_THAT(msg, HasSubstr(temp_path("long_header")));
  EXPECT_THAT(msg, HasSubstr("header of 200 bytes"));
  long_header[7] = 0xFF;  // a length near 2^64 must not overflow the check
  EXPECT_THAT(load_error("huge_header", long_header), HasSubstr("bytes follow the length"));

  msg = load_error("bad_json", image("{\"a\": [1, 2"));
  EXPECT_THAT(msg, HasSubstr(temp_path("bad_json")));
  EXPECT_THAT(msg, HasSubstr("not valid JSON"));
  EXPECT_THAT(load_error("empty_header", image("")), HasSubstr("not valid JSON"));

  msg = load_error("array_header", image("[1, 2]"));
  EXPECT_THAT(msg, HasSubstr(temp_path("array_header")));
  EXPECT_THAT(msg, HasSubstr("not a JSON object"));
}

// tools/fuzz.sh's first finding: a header number past double's range escaped as nlohmann's
// out_of_range instead of the one clear message.
TEST(Safetensors, AHugeNumberInTheHeaderIsAClearError) {
  const std::string header = "{\"w\": 11111111111111e111111}";
  const std::string msg = load_error("huge.safetensors", image(header));
  EXPECT_NE(msg.find("huge.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cannot be read"), std::string::npos) << msg;
}

TEST(Safetensors, EntryErrorsNameFileAndTensor) {
  const std::vector<uint8_t> data(16);
  struct Case {
    const char* name;
    const char* header;
    const char* expected;
  };
  const Case cases[] = {
      {"no_dtype", R"({"w":{"shape":[4],"data_offsets":[0,16]}})", "without a dtype"},
      {"int_dtype", R"({"w":{"dtype":3,"shape":[4],"data_offsets":[0,16]}})", "without a dtype"},
      {"no_shape", R"({"w":{"dtype":"F32","data_offsets":[0,16]}})", "without a shape"},
      {"str_shape", R"({"w":{"dtype":"F32","shape":"4","data_offsets":[0,16]}})",
       "without a shape"},
      {"float_dim", R"({"w":{"dtype":"F32","shape":[4.0],"data_offsets":[0,16]}})",
       "non-integer dimension"},
      {"no_offsets", R"({"w":{"dtype":"F32","shape":[4]}})", "without data_offsets"},
      {"one_offset", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0]}})",
       "without data_offsets"},
      {"neg_offset", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[-4,16]}})",
       "without data_offsets"},
      {"not_object", R"({"w":[1,2]})", "not a JSON object"},
      {"neg_dim", R"({"w":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})",
       "negative dimension -4"},
      {"beyond", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
       "beyond the data section of 16 bytes"},
      {"reversed", R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[16,0]}})",
       "end before they begin"},
      {"size", R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", "needs 12 bytes"},
      {"half_size", R"({"w":{"dtype":"F16","shape":[4],"data_offsets":[0,16]}})", "needs 8 bytes"},
      {"huge_shape",
       R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]}})",
       "too large"},
      {"dtype", R"({"w":{"dtype":"F12","shape":[4],"data_offsets":[0,16]}})",
       "unknown dtype 'F12'"},
      {"meta", R"({"__metadata__":{"k":1},"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
       "__metadata__ key 'k'"},
  };
  for (const Case& c : cases) {
    const std::string msg = load_error(c.name, image(c.header, data));
    EXPECT_THAT(msg, HasSubstr(temp_path(c.name))) << c.name;
    EXPECT_THAT(msg, HasSubstr(c.expected)) << c.name;
    if (std::string(c.name) != "meta") {
      EXPECT_THAT(msg, HasSubstr("'w'")) << c.name;
    }
  }
}

TEST(Safetensors, AbsentTensorAndUnreadableDtype) {
  std::vector<uint8_t> data(16);
  auto f = SafetensorsFile::parse(
      image(R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})", data), "ids.st");
  EXPECT_EQ(f.info("ids").dtype, "I64");
  EXPECT_EQ(f.info("ids").numel(), 2);
  try {
    f.to_float("ids");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("'ids'"));
    EXPECT_THAT(e.what(), HasSubstr("ids.st"));
    EXPECT_THAT(e.what(), HasSubstr("I64"));
    EXPECT_THAT(e.what(), HasSubstr("F32, F16, BF16, F64"));
  }
  for (auto call : {+[](const SafetensorsFile& s) { s.info("fc.weight"); },
                    +[](const SafetensorsFile& s) { s.to_float("fc.weight"); }}) {
    try {
      call(f);
      FAIL() << "no error";
    } catch (const UserError& e) {
      EXPECT_THAT(e.what(), HasSubstr("'fc.weight'"));
      EXPECT_THAT(e.what(), HasSubstr("ids.st"));
    }
  }
}

TEST(Safetensors, SaveErrors) {
  const std::string path = temp_path("save_errors");
  try {
    save_safetensors(path, {{"w", {2, 3}, {1, 2, 3, 4, 5}}});
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path));
    EXPECT_THAT(e.what(), HasSubstr("'w' has 5 values but shape [2,3]"));
  }
  EXPECT_THROW(save_safetensors(path, {{"w", {-1}, {}}}), UserError);
  EXPECT_THROW(save_safetensors(path, {{"w", {1}, {1}}, {"w", {1}, {2}}}), UserError);
  const std::string unwritable = testing::TempDir() + "cnnbench_no_such_dir/out.safetensors";
  try {
    save_safetensors(unwritable, {{"w", {1}, {1}}});
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr(unwritable));
  }
}

TEST(Safetensors, ReadsIntegerLabelsAndRefusesFloatsAsIntegers) {
  // labels I64 [3] = (7, -1, 199), small I32 [2] = (5, 6), and x F32 [1].
  std::vector<uint8_t> data;
  for (int64_t v : {int64_t(7), int64_t(-1), int64_t(199)})
    for (int i = 0; i < 8; ++i) data.push_back(uint8_t(uint64_t(v) >> (8 * i)));
  for (int32_t v : {5, 6})
    for (int i = 0; i < 4; ++i) data.push_back(uint8_t(uint32_t(v) >> (8 * i)));
  const float one = 1.0f;
  uint8_t fb[4];
  std::memcpy(fb, &one, 4);
  data.insert(data.end(), fb, fb + 4);
  const std::string header = R"({"labels":{"dtype":"I64","shape":[3],"data_offsets":[0,24]},)"
                             R"("small":{"dtype":"I32","shape":[2],"data_offsets":[24,32]},)"
                             R"("x":{"dtype":"F32","shape":[1],"data_offsets":[32,36]}})";
  const SafetensorsFile f = SafetensorsFile::parse(image(header, data), "labels.safetensors");
  EXPECT_EQ(f.to_int64("labels"), (std::vector<int64_t>{7, -1, 199}));
  EXPECT_EQ(f.to_int64("small"), (std::vector<int64_t>{5, 6}));
  try {
    f.to_int64("x");
    FAIL() << "F32 read as integers";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot be read as integers"));
    EXPECT_THAT(e.what(), HasSubstr("'x'"));
  }
}

}  // namespace
}  // namespace cnnbench
