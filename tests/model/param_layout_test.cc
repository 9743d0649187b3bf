// ParamLayout: tensors back to back in one key space, found by name.
#include "model/param_layout.h"

#include <gtest/gtest.h>

namespace model {
namespace {

TEST(ParamLayoutTest, TensorsFollowEachOtherAndCoverTheKeySpace) {
  ParamLayout layout;
  EXPECT_EQ(layout.num_params(), 0u);
  EXPECT_EQ(layout.Add("w1", 784, 256), 0u);
  EXPECT_EQ(layout.Add("b1", 256), 1u);
  EXPECT_EQ(layout.Add("w2", 256, 10), 2u);
  EXPECT_EQ(layout.tensor(0).offset, 0u);
  EXPECT_EQ(layout.tensor(1).offset, 784u * 256);
  EXPECT_EQ(layout.tensor(2).offset, 784u * 256 + 256);
  EXPECT_EQ(layout.tensor(1).size(), 256u);
  EXPECT_EQ(layout.num_params(), 784u * 256 + 256 + 2560);
  const TensorSlot* w2 = layout.Find("w2");
  ASSERT_NE(w2, nullptr);
  EXPECT_EQ(w2->rows, 256u);
  EXPECT_EQ(w2->cols, 10u);
  EXPECT_EQ(layout.Find("w3"), nullptr);
  EXPECT_EQ(layout.tensors().size(), 3u);
}

}  // namespace
}  // namespace model
