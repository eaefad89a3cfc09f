#include "refit/core/quantized_problem.h"

#include <gtest/gtest.h>

#include "error_code.h"

namespace refit {
namespace {

Layout on(Shape shape, std::vector<Rank> ranks, const char* placements) {
  const auto n = static_cast<std::int64_t>(ranks.size());
  return Layout::make(std::move(shape), Mesh::make({n}, std::move(ranks)).value(),
                      parse_placements(placements).value())
      .value();
}

// Two training ranks (0, 1) hold a 256x512 weight split by rows; two inference ranks (2, 3)
// split it by columns; a 1-D norm rides along.
ReshardProblem two_by_two(const char* source_placement = "S0") {
  std::vector<TensorReshard> t;
  t.push_back({.tensor = TensorSpec{.name = "w.weight", .shape = {256, 512}},
               .source = on({256, 512}, {Rank{0}, Rank{1}}, source_placement),
               .destination = on({256, 512}, {Rank{2}, Rank{3}}, "S1")});
  t.push_back({.tensor = TensorSpec{.name = "norm.weight", .shape = {512}},
               .source = on({512}, {Rank{0}, Rank{1}}, "R"),
               .destination = on({512}, {Rank{2}, Rank{3}}, "R")});
  return ReshardProblem::make(std::move(t), 2, 2).value();
}

const auto kAll = [](const TensorSpec&) { return true; };

TEST(QuantizeProblem, AtTheSenderFp8AndScalesTravel) {
  const auto q = quantize_problem(two_by_two(), {.scheme = QuantScheme::kFp8Block128}, kAll).value();
  ASSERT_EQ(q.tensors().size(), 3u);  // weight, its scales, the untouched norm
  const auto& w = q.tensors()[0].tensor;
  const auto& s = q.tensors()[1];
  EXPECT_EQ(w.dtype, DType::kFP8E4M3);
  EXPECT_EQ(w.quantization->site, QuantSite::kSender);
  EXPECT_EQ(s.tensor.name, "w.weight_scale_inv");
  EXPECT_EQ(s.tensor.shape, (Shape{2, 4}));
  // Rank 1 holds rows 128..255 = block row 1; rank 3 holds columns 256..511 = block columns 2, 3.
  EXPECT_EQ(s.source.local_box(Rank{1}).value(), (Box{{1, 0}, {1, 4}}));
  EXPECT_EQ(s.destination.local_box(Rank{3}).value(), (Box{{0, 2}, {2, 2}}));
  EXPECT_FALSE(q.tensors()[2].tensor.quantization);
  // Bytes: 256*512 fp8 + 8 fp32 scales + 512 bf16 = 131072 + 32 + 1024.
  EXPECT_EQ(q.total_bytes().value, 131072 + 32 + 1024);
}

TEST(QuantizeProblem, WhereTheTrainingLayoutCutsBlocksTheReceiverQuantizes) {
  // Rows in parts of 200: rank 0 holds rows 0..199, which cuts block row 1 (rows 128..255).
  const auto q = quantize_problem(two_by_two("S0:200"),
                                  {.scheme = QuantScheme::kFp8Block128, .site = QuantSite::kSender}, kAll)
                     .value();
  ASSERT_EQ(q.tensors().size(), 2u);  // no scales travel
  EXPECT_EQ(q.tensors()[0].tensor.dtype, DType::kBF16);
  EXPECT_EQ(q.tensors()[0].tensor.quantization->site, QuantSite::kReceiver);
}

TEST(QuantizeProblem, RefusesAnInferenceLayoutThatCutsBlocksNamingTheTensor) {
  // mxfp8 blocks are 1x32: columns split 512 -> 256 are whole blocks; block128 over 3 columns not.
  std::vector<TensorReshard> t;
  t.push_back({.tensor = TensorSpec{.name = "w.weight", .shape = {256, 384}},
               .source = on({256, 384}, {Rank{0}}, "R"),
               .destination = on({256, 384}, {Rank{1}, Rank{2}}, "S1")});  // 192 columns each
  const auto p = ReshardProblem::make(std::move(t), 1, 2).value();
  const auto bad = quantize_problem(p, {.scheme = QuantScheme::kFp8Block128}, kAll);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("'w.weight'"), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find("inference layout"), std::string::npos) << bad.error().message;
  EXPECT_TRUE(quantize_problem(p, {.scheme = QuantScheme::kMxfp8}, kAll));
}

TEST(QuantizeProblem, AtTheReceiverEverythingStaysBf16) {
  const auto q =
      quantize_problem(two_by_two(), {.scheme = QuantScheme::kMxfp8, .site = QuantSite::kReceiver}, kAll)
          .value();
  EXPECT_EQ(q.total_bytes(), two_by_two().total_bytes());
  EXPECT_EQ(q.tensors()[0].tensor.quantization->scheme, QuantScheme::kMxfp8);
}

TEST(QuantizeProblem, WeightsAlreadyInFp8MoveAsTheyAreWithTheirScales) {
  // FP8 training: the 256x512 weight is fp8 on both sides; its 2x4 fp32 scales, held by the
  // training ranks beside it, move with it. Nothing is quantized on the way.
  std::vector<TensorReshard> t = two_by_two().tensors();
  t[0].tensor.dtype = DType::kFP8E4M3;
  const auto p = ReshardProblem::make(t, 2, 2).value();
  const auto q = quantize_problem(p, {.scheme = QuantScheme::kFp8Block128}, kAll).value();
  ASSERT_EQ(q.tensors().size(), 3u);
  const Quantization trained{
      .scheme = QuantScheme::kFp8Block128, .site = QuantSite::kTraining, .from = DType::kFP8E4M3};
  EXPECT_EQ(q.tensors()[0].tensor.dtype, DType::kFP8E4M3);
  EXPECT_EQ(q.tensors()[0].tensor.quantization, trained);
  EXPECT_EQ(q.tensors()[1].tensor.name, "w.weight_scale_inv");
  EXPECT_EQ(q.tensors()[1].tensor.quantization->scales_of, "w.weight");
  EXPECT_EQ(q.tensors()[1].source.local_box(Rank{1}).value(), (Box{{1, 0}, {1, 4}}));
  EXPECT_EQ(q.total_bytes().value, 256 * 512 + 8 * 4 + 1024);
  // The training ranks hold what moves: fp8 values and the scales, nobody quantizes.
  EXPECT_TRUE(held_at_source(q.tensors()[1].tensor));
  EXPECT_EQ(held_dtype(q.tensors()[0].tensor, true), DType::kFP8E4M3);
  EXPECT_EQ(quantization_partners(std::vector{q.tensors()[0].tensor, q.tensors()[1].tensor}),
            (std::vector<std::int32_t>{-1, -1}));
  // Rows in parts of 200 would cut block row 1 on the training side: refused, naming it.
  t = two_by_two("S0:200").tensors();
  t[0].tensor.dtype = DType::kFP8E4M3;
  const auto cut =
      quantize_problem(ReshardProblem::make(t, 2, 2).value(), {.scheme = QuantScheme::kFp8Block128}, kAll);
  ASSERT_FALSE(cut);
  EXPECT_NE(cut.error().message.find("the training layout"), std::string::npos) << cut.error().message;
}

TEST(QuantizeProblem, TrainedInFp8MakesTheBf16CheckpointsWeightsFp8OnBothSides) {
  // --quantize-at training: the weights vLLM quantizes are trained in fp8 (Transformer Engine's
  // fp8 parameters), so they move as fp8 values and scales; the norm stays bf16. Same bytes as
  // quantizing at the senders, 256*512 + 8*4 + 512*2, but nobody quantizes.
  const auto q = quantize_problem(two_by_two(),
                                  {.scheme = QuantScheme::kFp8Block128, .site = QuantSite::kTraining}, kAll)
                     .value();
  ASSERT_EQ(q.tensors().size(), 3u);
  EXPECT_EQ(q.tensors()[0].tensor.quantization->site, QuantSite::kTraining);
  EXPECT_EQ(q.tensors()[0].tensor.quantization->from, DType::kFP8E4M3);
  EXPECT_EQ(q.tensors()[1].tensor.quantization->site, QuantSite::kTraining);
  EXPECT_EQ(q.tensors()[2].tensor.dtype, DType::kBF16);
  EXPECT_EQ(q.total_bytes().value, 131072 + 32 + 1024);
  // A training layout that cuts blocks cannot be trained in fp8 blocks: refused, not sent as bf16.
  const auto cut = quantize_problem(
      two_by_two("S0:200"), {.scheme = QuantScheme::kFp8Block128, .site = QuantSite::kTraining}, kAll);
  ASSERT_FALSE(cut);
  EXPECT_NE(cut.error().message.find("'w.weight'"), std::string::npos) << cut.error().message;
  EXPECT_NE(cut.error().message.find("trained in whole blocks"), std::string::npos) << cut.error().message;
}

TEST(CheckQuantized, RefusesInconsistentPartsNamingTheTensor) {
  auto tensors =
      quantize_problem(two_by_two(), {.scheme = QuantScheme::kFp8Block128}, kAll).value().tensors();
  auto no_scales = tensors;
  no_scales.erase(no_scales.begin() + 1);
  auto r = ReshardProblem::make(no_scales, 2, 2);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("needs one scales tensor"), std::string::npos) << r.error().message;
  auto wrong_dtype = tensors;
  wrong_dtype[0].tensor.dtype = DType::kBF16;  // says sender but moves bf16
  EXPECT_EQ(testing::error_code(ReshardProblem::make(wrong_dtype, 2, 2)), ErrorCode::kMismatch);
  auto orphan = tensors;
  orphan[1].tensor.quantization->scales_of = "nowhere";
  EXPECT_EQ(testing::error_code(ReshardProblem::make(orphan, 2, 2)), ErrorCode::kNotFound);
  auto mixed_sites = tensors;  // a weight quantized at the sender with scales from training
  mixed_sites[1].tensor.quantization->site = QuantSite::kTraining;
  EXPECT_EQ(testing::error_code(ReshardProblem::make(mixed_sites, 2, 2)), ErrorCode::kMismatch);
  auto trained_from_bf16 = tensors;  // trained in fp8 but said to come from bf16
  trained_from_bf16[0].tensor.quantization->site = QuantSite::kTraining;
  trained_from_bf16[1].tensor.quantization->site = QuantSite::kTraining;
  r = ReshardProblem::make(trained_from_bf16, 2, 2);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("'w.weight': quantizes from bf16, not fp8_e4m3"), std::string::npos)
      << r.error().message;
}

// Two training ranks (0, 1) hold 256x512 weights in rows of 200, which cuts block row 1 (rows
// 128..255); two inference engines of two ranks each (2, 3 and 4, 5) split them by columns.
ReshardProblem cut_into_two_engines(int weights) {
  std::vector<TensorReshard> t;
  const auto engines = [] {
    return Layout::make({256, 512}, Mesh::make({2, 2}, {Rank{2}, Rank{3}, Rank{4}, Rank{5}}).value(),
                        parse_placements("R,S1").value())
        .value();
  };
  for (int i = 0; i < weights; ++i)
    t.push_back({.tensor = TensorSpec{.name = "w" + std::to_string(i), .shape = {256, 512}},
                 .source = on({256, 512}, {Rank{0}, Rank{1}}, "S0:200"),
                 .destination = engines()});
  return ReshardProblem::make(std::move(t), 2, 4).value();
}

TEST(QuantizeProblem, AtTheLandingRanksOneReplicaGetsBf16AndTheOthersFp8) {
  const auto q = quantize_problem(cut_into_two_engines(1),
                                  {.scheme = QuantScheme::kFp8Block128, .site = QuantSite::kLanding}, kAll)
                     .value();
  ASSERT_EQ(q.tensors().size(), 3u);  // values, scales, landing copy
  const auto& values = q.tensors()[0];
  const auto& scales = q.tensors()[1];
  const auto& copy = q.tensors()[2];
  EXPECT_EQ(values.tensor.dtype, DType::kFP8E4M3);
  EXPECT_TRUE(values.tensor.quantization->made_at_landing());
  // Engine 0 (ranks 2, 3) lands it: the values' and scales' sources are its boxes.
  EXPECT_EQ(values.source.mesh().ranks(), (std::vector<Rank>{Rank{2}, Rank{3}}));
  EXPECT_EQ(values.source.local_box(Rank{3}).value(), (Box{{0, 256}, {256, 256}}));
  EXPECT_EQ(scales.source.local_box(Rank{3}).value(), (Box{{0, 2}, {2, 2}}));
  EXPECT_EQ(scales.destination.local_box(Rank{5}).value(), (Box{{0, 2}, {2, 2}}));
  // The landing copy: bf16 from the training layout to engine 0 only.
  EXPECT_EQ(copy.tensor.name, "w0@landing");
  EXPECT_EQ(copy.tensor.dtype, DType::kBF16);
  EXPECT_EQ(copy.tensor.quantization->landing_of, "w0");
  EXPECT_EQ(copy.source, cut_into_two_engines(1).tensors()[0].source);
  EXPECT_EQ(copy.destination, values.source);
  // Nobody passes values or scales as a source buffer; the training ranks pass the copy.
  EXPECT_FALSE(held_at_source(values.tensor));
  EXPECT_FALSE(held_at_source(scales.tensor));
  EXPECT_TRUE(held_at_source(copy.tensor));
  // Bytes: fp8 values 256*512, fp32 scales 2*4*4, the bf16 copy 256*512*2.
  EXPECT_EQ(q.total_bytes().value, 131072 + 32 + 262144);
  const auto parts = landing_weights(std::vector{values.tensor, scales.tensor, copy.tensor});
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].values, 0u);
  EXPECT_EQ(parts[0].scales, 1u);
  EXPECT_EQ(parts[0].copy, 2u);
}

TEST(QuantizeProblem, WeightsLandOnTheLeastLoadedReplica) {
  const auto q = quantize_problem(cut_into_two_engines(3),
                                  {.scheme = QuantScheme::kFp8Block128, .site = QuantSite::kLanding}, kAll)
                     .value();
  // Equal weights alternate: engine 0, engine 1, engine 0.
  EXPECT_EQ(q.tensors()[0].source.mesh().ranks(), (std::vector<Rank>{Rank{2}, Rank{3}}));
  EXPECT_EQ(q.tensors()[3].source.mesh().ranks(), (std::vector<Rank>{Rank{4}, Rank{5}}));
  EXPECT_EQ(q.tensors()[6].source.mesh().ranks(), (std::vector<Rank>{Rank{2}, Rank{3}}));
}

TEST(QuantizeProblem, AtTheLandingRanksWholeBlocksAreStillQuantizedAtTheSender) {
  const auto q =
      quantize_problem(two_by_two(), {.scheme = QuantScheme::kFp8Block128, .site = QuantSite::kLanding}, kAll)
          .value();
  ASSERT_EQ(q.tensors().size(), 3u);
  EXPECT_EQ(q.tensors()[0].tensor.quantization->site, QuantSite::kSender);
}

TEST(CheckQuantized, RefusesLandingPartsThatDoNotFitNamingTheTensor) {
  const auto tensors =
      quantize_problem(cut_into_two_engines(1),
                       {.scheme = QuantScheme::kFp8Block128, .site = QuantSite::kLanding}, kAll)
          .value()
          .tensors();
  auto no_copy = tensors;
  no_copy.pop_back();
  auto r = ReshardProblem::make(no_copy, 2, 4);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("'w0': a weight quantized at its landing ranks needs one landing copy"),
            std::string::npos)
      << r.error().message;
  auto elsewhere = tensors;  // the copy lands on engine 1, the values are made on engine 0
  elsewhere[2].destination = landing_layout(elsewhere[0].destination, 1);
  r = ReshardProblem::make(elsewhere, 2, 4);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("'w0@landing': its inference layout is not the landing layout of 'w0'"),
            std::string::npos)
      << r.error().message;
  auto swapped = tensors;  // landing ranks that do not hold these boxes in the inference layout
  swapped[0].source = on({256, 512}, {Rank{3}, Rank{2}}, "S1");
  r = ReshardProblem::make(swapped, 2, 4);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("landing rank 3 holds [0:256, 0:256]"), std::string::npos)
      << r.error().message;
  auto on_training = tensors;  // values a training rank would hold
  on_training[0].source = on({256, 512}, {Rank{0}, Rank{1}}, "S1");
  EXPECT_EQ(testing::error_code(ReshardProblem::make(on_training, 2, 4)), ErrorCode::kOutOfRange);
  auto both = tensors;
  both[2].tensor.quantization->scales_of = "w0";
  r = ReshardProblem::make(both, 2, 4);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("scales or its landing copy, not both"), std::string::npos)
      << r.error().message;
}

}  // namespace
}  // namespace refit
