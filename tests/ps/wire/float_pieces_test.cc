#include "ps/wire/float_pieces.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace ps {
namespace {

// Lays `values` out as bytes behind a 1-byte offset (so no float is aligned)
// and cuts them into pieces at the given byte positions.
struct Scattered {
  std::string storage;
  std::vector<absl::string_view> pieces;
};

Scattered Scatter(const std::vector<float>& values,
                  const std::vector<size_t>& cuts) {
  Scattered s;
  s.storage.assign(1, 'x');
  s.storage.append(reinterpret_cast<const char*>(values.data()),
                   values.size() * sizeof(float));
  absl::string_view all(s.storage);
  all.remove_prefix(1);
  size_t at = 0;
  for (size_t cut : cuts) {
    s.pieces.push_back(all.substr(at, cut - at));
    at = cut;
  }
  s.pieces.push_back(all.substr(at));
  return s;
}

TEST(FloatPiecesTest, RunsReassembleValuesSplitMidFloat) {
  std::vector<float> values(100);
  for (int i = 0; i < 100; ++i) values[i] = i * 1.5f - 7;
  // Cuts inside floats, on float boundaries, and an empty piece.
  Scattered s = Scatter(values, {3, 3, 8, 9, 201, 398});
  FloatPieces pieces(s.pieces);
  ASSERT_EQ(pieces.byte_size(), 400u);
  std::vector<float> seen;
  pieces.ForEachRun(60, [&](UnalignedFloats run) {
    for (size_t i = 0; i < run.size(); ++i) seen.push_back(run[i]);
  });
  std::vector<float> rest(40);
  pieces.Read(rest.data(), 40);
  seen.insert(seen.end(), rest.begin(), rest.end());
  EXPECT_EQ(seen, values);
  EXPECT_EQ(pieces.remaining_bytes(), 0u);
}

TEST(FloatPiecesTest, FiniteCheckFindsNanAndInfAnywhere) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(),
                    std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    for (size_t where : {0u, 1u, 50u, 99u}) {
      std::vector<float> values(100, 1.0f);
      values[where] = bad;
      Scattered s = Scatter(values, {7, 150});
      FloatPieces pieces(s.pieces);
      EXPECT_FALSE(pieces.RestAllFinite()) << where;
      EXPECT_FALSE(AllFinite(UnalignedFloats(values.data(), values.size())));
    }
  }
  std::vector<float> fine(100, std::numeric_limits<float>::max());
  fine[3] = -0.0f;
  fine[4] = std::numeric_limits<float>::denorm_min();
  Scattered s = Scatter(fine, {5});
  FloatPieces pieces(s.pieces);
  EXPECT_TRUE(pieces.RestAllFinite());
}

TEST(FloatPiecesTest, CopyAndCheckCopiesEveryValueAndFindsEachBadOne) {
  // Lengths around the vector widths, so that bad values fall in vector
  // bodies and in tails; the source starts off a float boundary.
  for (size_t n : {1u, 7u, 8u, 9u, 31u, 100u}) {
    std::vector<float> values(n);
    for (size_t i = 0; i < n; ++i) values[i] = 0.5f * i - 3;
    Scattered s = Scatter(values, {});
    std::vector<float> copy(n + 1, 42.0f);
    const UnalignedFloats from(s.pieces[0].data(), n);
    ASSERT_TRUE(CopyAndCheckFinite(from, reinterpret_cast<char*>(copy.data())));
    EXPECT_EQ(std::vector<float>(copy.begin(), copy.begin() + n), values);
    EXPECT_EQ(copy[n], 42.0f) << "wrote past the end";
    for (float bad : {std::numeric_limits<float>::quiet_NaN(),
                      std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity()}) {
      for (size_t where = 0; where < n; ++where) {
        std::vector<float> some = values;
        some[where] = bad;
        Scattered t = Scatter(some, {});
        EXPECT_FALSE(CopyAndCheckFinite(UnalignedFloats(t.pieces[0].data(), n),
                                        reinterpret_cast<char*>(copy.data())))
            << n << " " << where;
      }
    }
  }
}

TEST(FloatPiecesTest, ValuesMarkedFiniteAreNotReadAgain) {
  std::vector<float> values(10, 1.0f);
  values[4] = std::numeric_limits<float>::quiet_NaN();
  Scattered s = Scatter(values, {6});
  FloatPieces pieces(s.pieces);
  pieces.MarkAllFinite();
  EXPECT_TRUE(pieces.RestAllFinite());
  EXPECT_EQ(pieces.remaining_bytes(), 0u);
  pieces.Reset();
  EXPECT_EQ(pieces.remaining_bytes(), 40u);
}

TEST(FloatPiecesTest, MagnitudesAreCheckedAgainstTheBound) {
  auto check = [](const std::vector<float>& v, float bound) {
    return CheckMagnitudes(UnalignedFloats(v.data(), v.size()), bound);
  };
  const std::vector<float> values = {0.5f, -3.25f, 2.0f, -0.0f, 1e-40f};
  EXPECT_TRUE(check(values, 3.25f).finite);
  EXPECT_TRUE(check(values, 3.25f).within);
  EXPECT_FALSE(check(values, 3.24f).within);
  EXPECT_TRUE(check({}, 0.0f).within);
  const float most = std::numeric_limits<float>::max();
  const std::vector<float> largest(37, -most);
  EXPECT_TRUE(check(largest, most).finite);
  EXPECT_TRUE(check(largest, most).within);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(),
                    -std::numeric_limits<float>::quiet_NaN(),
                    std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    for (size_t where : {0u, 18u, 36u}) {
      std::vector<float> some(37, 1.0f);
      some[where] = bad;
      EXPECT_FALSE(check(some, most).finite) << where;
      EXPECT_FALSE(check(some, most).within) << where;
    }
  }
}

}  // namespace
}  // namespace ps
