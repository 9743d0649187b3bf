#include "ps/obs/progress_line.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace ps {
namespace {

// What `write` printed through a ProgressLine on a memory stream.
template <typename Fn>
std::string Output(bool terminal, Fn write) {
  char* buffer = nullptr;
  size_t size = 0;
  std::FILE* out = open_memstream(&buffer, &size);
  {
    ProgressLine line(out, terminal);
    write(line);
  }
  std::fclose(out);
  std::string text(buffer, size);
  std::free(buffer);
  return text;
}

TEST(ProgressLineTest, OnATerminalTheLineIsRewrittenInPlace) {
  const std::string out = Output(true, [](ProgressLine& p) {
    p.Update("step 100");
    p.Update("step 200");
    p.Print("epoch 0 done");
    p.Update("step 300");
  });
  EXPECT_EQ(out,
            "\r\033[Kstep 100\r\033[Kstep 200\nepoch 0 done\n"
            "\r\033[Kstep 300\n");
}

TEST(ProgressLineTest, ElsewhereEveryUpdateIsALineOfItsOwn) {
  const std::string out = Output(false, [](ProgressLine& p) {
    p.Update("step 100");
    p.Print("epoch 0 done");
    p.Update("step 200");
  });
  EXPECT_EQ(out, "step 100\nepoch 0 done\nstep 200\n");
}

}  // namespace
}  // namespace ps
