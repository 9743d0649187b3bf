// shardps-sim (experiments/sim) against closed forms exact enough to catch a
// unit error, the one-host servers against every shard simulated, the
// launcher's steady-rate window, and inputs it must refuse by name.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "experiments/sim/inputs.h"
#include "experiments/sim/job_model.h"
#include "ps/base/program.h"
#include "util/files.h"
#include "util/processes.h"

namespace sim {
namespace {

constexpr char kFreeCosts[] =
    "# no costs but the links'\n"
    "startup_cpu 0\nstorage_efficiency 1\nread_cpu_per_byte 0\n"
    "startup_wait 0\nstartup_cpu_per_server 0\nstartup_threads 1\n"
    "launch_cpu 0\n"
    "pull_efficiency 1\npush_efficiency 1\npull_delay 0\npush_delay 0\n"
    "call_cpu 0\n"
    "client_cpu_per_byte 0\nserver_cpu_per_byte 0\nwire_cpu_per_byte 0\n"
    "transfer_cv 0\nqueued_push_bytes 0\n";

// `base` with the keys of `values` set to theirs.
std::string CostsWith(const std::map<std::string, std::string>& values,
                      absl::string_view base = kFreeCosts) {
  std::string out;
  for (absl::string_view line : absl::StrSplit(base, '\n', absl::SkipEmpty())) {
    auto it = values.find(std::string(line.substr(0, line.find(' '))));
    if (it == values.end()) {
      absl::StrAppend(&out, line, "\n");
    } else {
      absl::StrAppend(&out, it->first, " ", it->second, "\n");
    }
  }
  return out;
}

struct Figures {
  double init = -1, rate = -1, first_half = -1, second_half = -1;
  double pull_ms = -1, push_ms = -1;
};

class SimTest : public testing::Test {
 protected:
  // A file of its own for each call: a test may hold several.
  std::string Calibration(const std::string& text) {
    const std::string path =
        absl::StrCat(tmp_.path(), "/calibration-", ++calibrations_, ".txt");
    std::ofstream(path) << text;
    return path;
  }

  // Runs shardps-sim with `flags`; its exit code and output.
  std::pair<int, std::string> Sim(const std::string& flags,
                                  const std::string& calibration = "") {
    return testutil::Shell(absl::StrCat(
        ps::SiblingBinary("shardps-sim"), " --calibration=",
        calibration.empty() ? Calibration(kFreeCosts) : calibration, " ", flags,
        " 2>&1"));
  }

  Figures Run(const std::string& flags, const std::string& calibration = "") {
    auto [code, out] = Sim(flags, calibration);
    EXPECT_EQ(code, 0) << out;
    std::smatch m;
    const std::regex line(
        R"re("init_seconds":([0-9.e+-]+),"samples_per_second":([0-9.e+-]+),)re"
        R"re("first_half":([0-9.e+-]+),"second_half":([0-9.e+-]+),)re"
        R"re("pull_ms":([0-9.e+-]+),"push_ms":([0-9.e+-]+))re");
    Figures f;
    if (!std::regex_search(out, m, line)) {
      ADD_FAILURE() << out;
      return f;
    }
    f.init = std::stod(m[1]);
    f.rate = std::stod(m[2]);
    f.first_half = std::stod(m[3]);
    f.second_half = std::stod(m[4]);
    f.pull_ms = std::stod(m[5]);
    f.push_ms = std::stod(m[6]);
    return f;
  }

  testutil::ScopedTempDir tmp_{"shardps-sim"};
  int calibrations_ = 0;
};

TEST_F(SimTest, OneWorkerOneServerStepsComputePlusTwoTransfers) {
  // M = 1.25 MB over 100 Mbit/s (12.5 MB/s) each way: 0.1 s a pull and a
  // push; step = 0.05 + 2 * 0.1 = 0.25 s, 16 samples a step: 64 samples/s.
  const Figures f =
      Run("--workers=1 --servers=1 --param_bytes=1250000 --compute_ms=50 "
          "--server_link=100mbit --worker_link=1gbit --steps=20");
  EXPECT_NEAR(f.rate, 64.0, 64.0 * 1e-4);
  EXPECT_NEAR(f.first_half, f.second_half, 1e-3 * f.rate);
  // fp16 halves the bytes both ways: step 0.15 s.
  EXPECT_NEAR(Run("--workers=1 --servers=1 --param_bytes=1250000 "
                  "--compute_ms=50 --server_link=100mbit --worker_link=1gbit "
                  "--compression=fp16")
                  .rate,
              16 / 0.15, 16 / 0.15 * 1e-4);
}

TEST_F(SimTest, SaturatedServerLinksMoveNTimesMOverSB) {
  // 16 workers, 4 servers, no compute, fast worker links. In lockstep
  // (sync) every pull, then every push, moves N * M / S = 5 MB through
  // each 12.5 MB/s server link: 0.4 s a phase, 0.8 s a step of 16 workers
  // x 16 samples: 320 samples/s.
  const std::string job =
      "--workers=16 --servers=4 --param_bytes=1250000 --compute_ms=0 "
      "--server_link=100mbit --worker_link=10gbit --steps=";
  for (const char* mode : {"", " --every_shard"}) {
    SCOPED_TRACE(mode);
    EXPECT_NEAR(Run(absl::StrCat(job, "20 --consistency=sync", mode)).rate,
                320.0, 320.0 * 1e-4);
  }
  // Async workers start at random points of a step and stay apart, pulls
  // overlapping pushes (each direction has the capacity): a step tends to
  // N * M / (S * B) = 0.4 s, 640 samples/s, which it cannot pass; the
  // pulls that started together share their links' time to the end.
  const Figures async = Run(absl::StrCat(job, "200"));
  EXPECT_GT(async.rate, 0.85 * 640);
  EXPECT_LE(async.rate, 640 * (1 + 1e-6));
}

TEST_F(SimTest, PullsQueuedBehindPushesFallIntoLockstep) {
  // The same async job, but a pull's request waits behind every push byte
  // queued for its servers (a window larger than any push): a worker that
  // pulls while others push starts only once they are done, so the
  // workers fall into step and move one direction at a time, as sync
  // ones do: 320 samples/s, half of what overlapping pulls and pushes
  // reach. Even a small window draws them towards it: with 1 KB they keep
  // only a little of the overlap.
  const std::string job =
      "--workers=16 --servers=4 --param_bytes=1250000 --compute_ms=0 "
      "--server_link=100mbit --worker_link=10gbit --steps=200";
  auto window = [&](const char* bytes) {
    return Calibration(CostsWith({{"queued_push_bytes", bytes}}));
  };
  EXPECT_NEAR(Run(job, window("1e9")).rate, 320, 320 * 0.01);
  const double small = Run(job, window("1000")).rate;
  EXPECT_GT(small, 1.03 * 320);
  EXPECT_LT(small, 0.9 * Run(job).rate);
}

TEST_F(SimTest, PullsAndPushesHaveTheirOwnEfficiency) {
  // One worker, one server, M = 1.25 MB on a 100 Mbit/s (12.5 MB/s) link
  // pulled at 0.8 of it (0.125 s) and pushed at 1.25 (0.08 s), 0.1 s of
  // compute: 0.305 s a step; with fixed delays of 10 and 20 ms a pull and
  // a push, 0.335 s.
  const std::string job =
      "--workers=1 --servers=1 --param_bytes=1250000 --compute_ms=100 "
      "--server_link=100mbit --worker_link=1gbit --steps=50 --batch=16";
  const std::string efficiencies =
      CostsWith({{"pull_efficiency", "0.8"}, {"push_efficiency", "1.25"}});
  const std::string both = Calibration(efficiencies);
  const Figures f = Run(job, both);
  EXPECT_NEAR(f.rate, 16 / 0.305, 16 / 0.305 * 1e-3);
  EXPECT_NEAR(f.pull_ms, 125, 0.01);
  EXPECT_NEAR(f.push_ms, 80, 0.01);
  const std::string delayed = Calibration(CostsWith(
      {{"pull_delay", "0.01"}, {"push_delay", "0.02"}}, efficiencies));
  EXPECT_NEAR(Run(job, delayed).rate, 16 / 0.335, 16 / 0.335 * 1e-3);
}

TEST_F(SimTest, TheWiresCpuIsSpentWhileTheBytesFlow) {
  // The same job with 2e-8 CPU seconds a byte on the way (0.0125 s at
  // each end of a 1.25 MB transfer, on cores of their own): it overlaps
  // the 0.1 s on the link and costs nothing. On one shared core with 16
  // workers the link is no longer the limit but the CPU is: each step
  // moves 2.5 MB, 0.05 s of the core, so at most 20 steps (320 samples)
  // a second.
  const std::string wire =
      Calibration(CostsWith({{"wire_cpu_per_byte", "2e-8"}}));
  const std::string job =
      "--servers=1 --param_bytes=1250000 --compute_ms=100 "
      "--server_link=100mbit --worker_link=1gbit --steps=40 --batch=16";
  EXPECT_NEAR(Run(job + " --workers=1", wire).rate, 16 / 0.3, 16 / 0.3 * 1e-3);
  const double shared =
      Run(job + " --workers=16 --server_link=10gbit --shared_cores=1", wire)
          .rate;
  EXPECT_LE(shared, 320 * (1 + 1e-3));
  EXPECT_GT(shared, 0.9 * 320);
}

TEST_F(SimTest, SequentialReadersShareTheStorageLink) {
  // 8 workers each read 10 MB through one 80 Mbit/s (10 MB/s) storage
  // link: 8 s, after 0.5 s of start-up CPU each on their own cores.
  const std::string calibration =
      Calibration(CostsWith({{"startup_cpu", "0.5"}}));
  const std::string job =
      "--servers=2 --dataset_bytes=10000000 "
      "--storage_link=80mbit --worker_link=1gbit --steps=3 --loader=";
  const std::string eight = "--workers=8 " + job;
  EXPECT_NEAR(Run(eight + "sequential", calibration).init, 8.5, 1e-3);
  // With 1 s of CPU checking the blocks, a reader alone takes 2 s: its
  // link idles while it checks. Eight that start together share each
  // block's transfer and check in step, so every check idles the link:
  // 8 + 1 s. Readers that start apart fill each other's gaps.
  const std::string checked = Calibration(
      CostsWith({{"startup_cpu", "0.5"}, {"read_cpu_per_byte", "1e-7"}}));
  EXPECT_NEAR(Run("--workers=1 " + job + "sequential", checked).init, 2.5,
              1e-3);
  EXPECT_NEAR(Run(eight + "sequential", checked).init, 9.5, 1e-3);
  // The parallel loader waits for one batch (16 x 3156 bytes) only.
  EXPECT_LT(Run(eight + "parallel", calibration).init, 0.6);
  // On a shared machine of 2 cores the 8 start-ups take 4 x 0.5 s.
  EXPECT_NEAR(Run(eight + "parallel --shared_cores=2", calibration).init, 2.0,
              0.1);
}

TEST_F(SimTest, StartUpsWaitThenShareTheMachinesCores) {
  // Each start-up waits 20 ms, then works 10 ms + 2 ms per server on each
  // of 2 threads. With S = 4, one worker on 2 cores: 20 + 18 ms; four at
  // once share the cores: 20 + 4 x 18 ms; on a host of one core each,
  // its 2 threads take 2 x 18 ms. (Four batches through 100 Gbit/s
  // storage and worker links add under 20 us.)
  const std::string costs = CostsWith({{"startup_cpu", "0.01"},
                                       {"startup_wait", "0.02"},
                                       {"startup_cpu_per_server", "0.002"},
                                       {"startup_threads", "2"}});
  const std::string calibration = Calibration(costs);
  const std::string job =
      "--servers=4 --loader=parallel --storage_link=100gbit "
      "--worker_link=100gbit --steps=2 "
      "--worker_cores=1 --workers=";
  EXPECT_NEAR(Run(job + "1 --shared_cores=2", calibration).init, 0.038, 5e-5);
  EXPECT_NEAR(Run(job + "4 --shared_cores=2", calibration).init, 0.092, 5e-5);
  EXPECT_NEAR(Run(job + "4", calibration).init, 0.056, 5e-5);
  // A launcher that spends 5 ms on each start: worker 0 starts at 5 ms,
  // works alone from 25 to 30 ms (5 of its 18), then shares the cores with
  // worker 1 (started at 10 ms) until it ends at 56 ms; worker 1 ends
  // alone at 61 ms. Each took 51 ms (at once they would take 20 + 36).
  const std::string launched =
      Calibration(CostsWith({{"launch_cpu", "0.005"}}, costs));
  EXPECT_NEAR(Run(job + "2 --shared_cores=2", launched).init, 0.051, 5e-5);
  EXPECT_NEAR(Run(job + "2 --shared_cores=2", calibration).init, 0.056, 5e-5);
  auto [code, out] =
      Sim("", Calibration(CostsWith({{"startup_threads", "1.5"}})));
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("startup_threads must be a whole number >= 1, got 1.5"),
            std::string::npos)
      << out;
}

TEST_F(SimTest, OneServerHostIsTheSameAsEveryShard) {
  // Costs everywhere, a slow worker link, sync and async: the S servers as
  // one host of S times the link and cores gives what S hosts give (when
  // the shards' transfers do not vary: see the next test).
  const std::string calibration = Calibration(
      "startup_cpu 0.01\nstorage_efficiency 0.9\nread_cpu_per_byte 0\n"
      "pull_efficiency 0.95\n"
      "startup_wait 0.003\nstartup_cpu_per_server 0.001\nstartup_threads 2\n"
      "launch_cpu 0.002\n"
      "push_efficiency 1.05\npull_delay 0.001\npush_delay 0.002\n"
      "call_cpu 0.0001\nclient_cpu_per_byte 1e-9\n"
      "server_cpu_per_byte 2e-9\nwire_cpu_per_byte 3e-9\ntransfer_cv 0\n"
      "queued_push_bytes 100000\n");
  for (const char* consistency : {"async", "sync"}) {
    const std::string job = absl::StrCat(
        "--workers=12 --servers=4 --param_bytes=4000000 --compute_ms=30 "
        "--server_link=200mbit --worker_link=150mbit --server_cores=1 "
        "--chunk_kb=256 --steps=10 --consistency=",
        consistency);
    const Figures one_host = Run(job, calibration);
    const Figures every = Run(job + " --every_shard", calibration);
    EXPECT_NEAR(one_host.rate, every.rate, every.rate * 1e-3) << consistency;
    EXPECT_NEAR(one_host.init, every.init, 1e-9) << consistency;
  }
}

TEST_F(SimTest, TheSlowestShardEndsEachTransfer) {
  // No compute, fast worker links, S shards of M / S bytes each on a link
  // of its own. A lone worker's transfers never vary: it runs exactly as
  // without the spread. Two sync workers pull together: the second to
  // start finds the first on every link, so each of its shards varies on
  // its own and its pull ends with the slowest. With one shard the
  // spread (mean 1) moves the rate little; with 8, the largest of 8
  // draws sets each such pull, and the rate falls well below that.
  const std::string spread = Calibration(CostsWith({{"transfer_cv", "0.3"}}));
  double ratio[2];
  for (int i : {0, 1}) {
    const std::string job = absl::StrCat(
        "--every_shard --param_bytes=1250000 --compute_ms=0 "
        "--server_link=100mbit --worker_link=10gbit --steps=400 --servers=",
        i == 0 ? 1 : 8);
    EXPECT_EQ(Run(job + " --workers=1", spread).rate,
              Run(job + " --workers=1").rate);
    const std::string pair = job + " --workers=2 --consistency=sync";
    ratio[i] = Run(pair, spread).rate / Run(pair).rate;
  }
  EXPECT_NEAR(ratio[0], 1, 0.1);
  EXPECT_LT(ratio[1], ratio[0] - 0.1);
}

TEST_F(SimTest, SyncWorkersStepInUnisonAsyncOnesOverlap) {
  // Sync: compute 20 ms, then 4 workers' pulls (4 x 0.625 MB through each
  // 12.5 MB/s server link, 0.2 s), then their pushes (0.2 s): 0.42 s a
  // step of 64 samples. Async workers overlap pulls with pushes: faster.
  const std::string job =
      "--workers=4 --servers=2 --param_bytes=1250000 --compute_ms=20 "
      "--server_link=100mbit --worker_link=1gbit --steps=20";
  const double sync = Run(job + " --consistency=sync").rate;
  EXPECT_NEAR(sync, 64 / 0.42, 64 / 0.42 * 1e-4);
  EXPECT_GT(Run(job + " --consistency=async").rate, 1.5 * sync);
}

TEST_F(SimTest, TransfersVaryByTheCalibratedSpreadReproducibly) {
  const std::string calibration =
      Calibration(CostsWith({{"transfer_cv", "0.2"}}));
  const std::string job =
      "--workers=8 --servers=2 --param_bytes=1250000 --compute_ms=50 "
      "--server_link=100mbit --worker_link=1gbit --steps=30 --seed=";
  const Figures one = Run(job + "1", calibration);
  EXPECT_EQ(one.rate, Run(job + "1", calibration).rate);
  EXPECT_NE(one.rate, Run(job + "2", calibration).rate);
  // Without the spread, the same job is one fixed figure.
  EXPECT_NE(one.rate, Run(job + "1").rate);
}

TEST_F(SimTest, OverlappedLayersHideTheirExchangesBehindCompute) {
  // Two layers of 1 MB over a 12.5 MB/s server link, 100 ms of compute.
  // A is read at 0 and its gradient written at 100 ms; B is read and its
  // gradient written at 50 ms. Without overlap a step is 100 + 80 + 80
  // (pull) + 80 + 80 (push): 0.42 s.
  const std::string job =
      "--workers=1 --servers=1 --compute_ms=100 --server_link=100mbit "
      "--worker_link=1gbit --steps=30 --layers=250000:0:1,250000:0.5:0.5 ";
  EXPECT_NEAR(Run(job + "--overlap=none").rate, 16 / 0.42, 1e-4);
  // With it, from a step's start S: B's push runs 50-130 ms, alone until
  // A's starts at 100, then both at half rate: B's ends at 160 and A's at
  // 210. B's answer runs from 160, alone until A's starts at 210, then
  // both at half rate: B's ends at 270, A's at 320. The next step's
  // forward reaches A at once, so it waits for it: a step is 0.32 s.
  const Figures layer = Run(job + "--overlap=layer");
  EXPECT_NEAR(layer.rate, 16 / 0.32, 1e-4);
  EXPECT_EQ(layer.push_ms, 0);  // the waits count as pulling
  // Waits of 220 ms a step; the first step's pull of both layers, 160 ms.
  EXPECT_NEAR(layer.pull_ms, (160 + 29 * 220) / 30.0, 1e-3);
  // Layers of 10 kB: only A's exchange, 0.8 + 0.8 ms, is not hidden.
  EXPECT_NEAR(Run("--workers=1 --servers=1 --compute_ms=100 "
                  "--server_link=100mbit --worker_link=1gbit --steps=30 "
                  "--layers=2500:0:1,2500:0.5:0.5 --overlap=layer")
                  .rate,
              16 / 0.1016, 1e-3);
}

TEST_F(SimTest, BadInputsAreRefusedByName) {
  auto [code, out] = Sim("--loader=fast");
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("--loader must be sequential or parallel"),
            std::string::npos)
      << out;
  std::tie(code, out) = Sim("--server_link=fast");
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("--server_link: link rate \"fast\""), std::string::npos)
      << out;
  std::tie(code, out) = Sim("--workers=0");
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("workers must be > 0"), std::string::npos) << out;
  for (const auto& [flags, message] :
       {std::pair{"--overlap=fast", "--overlap must be none or layer"},
        std::pair{"--overlap=layer", "overlap=layer needs the model's layers"},
        std::pair{"--overlap=layer --layers=10:0:1 --consistency=sync",
                  "async consistency only"},
        std::pair{"--layers=10:0", "layer 0 \"10:0\" is not PARAMS:"},
        std::pair{"--overlap=layer --layers=10:0:1,10:0.6:0.5",
                  "layer 1: needs bytes > 0 and 0 <= forward_at"},
        std::pair{"--layers=10:0:1 --param_bytes=4",
                  "--param_bytes 4 is not the --layers' 40 bytes"}}) {
    std::tie(code, out) = Sim(flags);
    EXPECT_EQ(code, 1) << flags;
    EXPECT_NE(out.find(message), std::string::npos) << flags << ": " << out;
  }
  const std::string missing = Calibration("startup_cpu 0\n");
  std::tie(code, out) = Sim("", missing);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("missing key"), std::string::npos) << out;
  std::tie(code, out) = Sim("", absl::StrCat(tmp_.path(), "/none.txt"));
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("none.txt"), std::string::npos) << out;
}

TEST(SimInputsTest, RatesAndCalibrationLines) {
  EXPECT_DOUBLE_EQ(*ParseRate("100mbit"), 12.5e6);
  EXPECT_DOUBLE_EQ(*ParseRate("10gbit"), 1.25e9);
  EXPECT_DOUBLE_EQ(*ParseRate("800kbit"), 1e5);
  EXPECT_FALSE(ParseRate("100mb").ok());
  EXPECT_FALSE(ParseRate("-1mbit").ok());
  absl::StatusOr<Calibration> c = ParseCalibration(kFreeCosts, "c.txt");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->pull_efficiency, 1);
  EXPECT_EQ(c->wire_cpu_per_byte, 0);
  c = ParseCalibration(absl::StrCat(kFreeCosts, "call_cpu 1\n"), "c.txt");
  EXPECT_NE(c.status().message().find("c.txt:19: unknown or repeated key"),
            std::string::npos)
      << c.status();
  c = ParseCalibration("startup_cpu x\n", "c.txt");
  EXPECT_NE(c.status().message().find("c.txt:1: startup_cpu: \"x\""),
            std::string::npos)
      << c.status();
}

TEST(SimSummaryTest, TheLaunchersSteadyWindow) {
  // Worker 0 ends steps at 1, 2, 3, 4; worker 1 at 2.5, 3.5, 4.5. Window
  // (2.5, 4]: steps ending at 3, 4 and 3.5: 3 x 10 samples in 1.5 s.
  const SimResult r =
      Summarize({0.5, 1.5}, {{1, 2, 3, 4}, {2.5, 3.5, 4.5}}, {10, 10});
  EXPECT_DOUBLE_EQ(r.init_seconds, 1.5);
  EXPECT_DOUBLE_EQ(r.samples_per_second, 20);
  EXPECT_DOUBLE_EQ(r.simulated_seconds, 4.5);
}

}  // namespace
}  // namespace sim
