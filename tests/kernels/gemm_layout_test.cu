// CPU checks of the GEMM engine's index math, each against an independent statement of the PTX /
// TMA rules: the wgmma accumulator fragment, stmatrix's fragment and addressing, the 128-byte
// swizzle TMA applies, the matrix descriptor fields, the shared-memory map, the tile schedule.
#include <gtest/gtest.h>
#include <stdint.h>
#include <map>
#include <set>
#include <string>
#include <vector>
#include "kernels/device/tile_scheduler.cuh"
#include "kernels/device/wgmma.cuh"
#include "kernels/gemm/epilogue.cuh"
#include "kernels/gemm/fp8_op.cuh"
#include "kernels/gemm/gemm_config.cuh"

namespace {

// PTX ISA, "wgmma .m64nNk16 register fragment D" (f32 accumulators): register i of lane l of
// warp w of the warpgroup holds element (row, col) of the 64 x N tile.
void fragmentPos(int w, int l, int i, int* row, int* col) {
  *row = 16 * w + l / 4 + 8 * ((i / 2) % 2);
  *col = 8 * (i / 4) + 2 * (l % 4) + (i % 2);
}

// TMA CU_TENSOR_MAP_SWIZZLE_128B, as a store reads its shared-memory box (1024-aligned base, rows
// of 128 bytes): the byte at `off` is byte `inRow` of box row `row`, where the 16-byte chunk
// index was XORed with row % 8.
void unswizzle(uint32_t off, int* row, int* inRow) {
  *row = static_cast<int>(off / 128);
  const int phys = static_cast<int>((off % 128) / 16);
  *inRow = ((phys ^ (*row % 8)) * 16) + static_cast<int>(off % 16);
}

// stmatrix.m8n8.x4 (PTX ISA): lane 8i + r gives the address of row r of matrix i; element
// (r, 2q + e) of matrix i comes from lane 4r + q, register i, half e (low half = lower column).
TEST(GemmLayout, StmatrixChunkLandsWhereTmaStoreReadsIt) {
  for (int bn : {128, 256}) {
    for (int ch = 0; ch < bn / 64; ++ch) {
      std::vector<int> seen(64 * 64, 0);
      for (int w = 0; w < 4; ++w) {
        for (int jj = 0; jj < 8; jj += 2) {
          const int j = ch * 8 + jj;
          for (int i = 0; i < 4; ++i) {
            for (int r = 0; r < 8; ++r) {
              const uint32_t rowAddr = mkccl::stmatrixOffset(w, 8 * i + r, jj);
              ASSERT_EQ(rowAddr % 16, 0u);
              for (int q = 0; q < 4; ++q) {
                for (int e = 0; e < 2; ++e) {
                  const int srcLane = 4 * r + q;
                  const int reg = 4 * j + 2 * i + e;  // the accumulator the epilogue packed into r[i]
                  int wantRow, wantCol;
                  fragmentPos(w, srcLane, reg, &wantRow, &wantCol);
                  int row, inRow;
                  unswizzle(rowAddr + (2 * q + e) * 2, &row, &inRow);
                  const int col = ch * 64 + inRow / 2;
                  ASSERT_EQ(row, wantRow) << "bn " << bn << " chunk " << ch << " warp " << w << " jj " << jj;
                  ASSERT_EQ(col, wantCol) << "bn " << bn << " chunk " << ch << " warp " << w << " jj " << jj;
                  ASSERT_LT(row, 64);
                  ++seen[row * 64 + (col - ch * 64)];
                }
              }
            }
          }
        }
      }
      for (int x : seen) ASSERT_EQ(x, 1);
    }
  }
}

TEST(GemmLayout, Fp32PairsLandWhereTmaStoreReadsThem) {
  for (int bn : {128, 256}) {
    for (int ch = 0; ch < bn / 32; ++ch) {
      std::vector<int> seen(64 * 32, 0);
      for (int w = 0; w < 4; ++w) {
        for (int l = 0; l < 32; ++l) {
          for (int jj = 0; jj < 4; ++jj) {
            for (int h = 0; h < 2; ++h) {
              const uint32_t off = mkccl::pairOffsetF32(w, l, jj, h);
              ASSERT_EQ(off % 8, 0u);
              for (int e = 0; e < 2; ++e) {
                int wantRow, wantCol;
                fragmentPos(w, l, 4 * (ch * 4 + jj) + 2 * h + e, &wantRow, &wantCol);
                int row, inRow;
                unswizzle(off + 4 * e, &row, &inRow);
                ASSERT_EQ(row, wantRow);
                ASSERT_EQ(ch * 32 + inRow / 4, wantCol);
                ++seen[row * 32 + inRow / 4];
              }
            }
          }
        }
      }
      for (int x : seen) ASSERT_EQ(x, 1);
    }
  }
}

// Shared-memory bank conflicts of the staging writes: a warp's 8-byte stores (256 bytes) need two
// wavefronts at best, i.e. every 4-byte bank hit exactly twice; each stmatrix 8x8 matrix (eight
// 16-byte rows) must cover all 32 banks once.
TEST(GemmLayout, StagingWritesAreConflictFree) {
  for (int w = 0; w < 4; ++w) {
    for (int jj = 0; jj < 4; ++jj) {
      for (int h = 0; h < 2; ++h) {
        int hits[32] = {0};
        for (int l = 0; l < 32; ++l) {
          const uint32_t off = mkccl::pairOffsetF32(w, l, jj, h);
          ++hits[(off / 4) % 32];
          ++hits[(off / 4 + 1) % 32];
        }
        for (int b = 0; b < 32; ++b) EXPECT_EQ(hits[b], 2) << "fp32 warp " << w << " jj " << jj << " bank " << b;
      }
    }
    for (int jj = 0; jj < 8; jj += 2) {
      for (int i = 0; i < 4; ++i) {
        int hits[32] = {0};
        for (int r = 0; r < 8; ++r) {
          const uint32_t off = mkccl::stmatrixOffset(w, 8 * i + r, jj);
          for (int k = 0; k < 4; ++k) ++hits[(off / 4 + k) % 32];
        }
        for (int b = 0; b < 32; ++b) EXPECT_EQ(hits[b], 1) << "stmatrix warp " << w << " matrix " << i;
      }
    }
  }
}

// PTX ISA "matrix descriptor": start address >> 4 in bits 0-13, leading byte offset >> 4 in 16-29,
// stride byte offset >> 4 in 32-45, base offset in 49-51, swizzle mode in 62-63 (1 = 128 B).
TEST(GemmLayout, DescriptorFields) {
  const uint32_t addr = 0x1C400;  // a 1024-aligned tile in the shared window
  const uint64_t d = mkccl::dev::smemDescSw128(addr);
  EXPECT_EQ(d & 0x3FFF, addr >> 4);
  EXPECT_EQ((d >> 16) & 0x3FFF, 1u);
  EXPECT_EQ((d >> 32) & 0x3FFF, 1024u >> 4);
  EXPECT_EQ((d >> 49) & 0x7, 0u);
  EXPECT_EQ(d >> 62, 1u);
  // Stepping K by 16 elements (32 bytes) moves only the start address.
  EXPECT_EQ(d + 3 * mkccl::dev::kDescK16Step, mkccl::dev::smemDescSw128(addr + 96));
}

template <class Cfg>
void checkConfig(int wantStages) {
  EXPECT_EQ(Cfg::kStages, wantStages);
  EXPECT_LE(Cfg::kSmemBytes, 227u * 1024u);
  // Every tile (and each consumer's 64-row half of A) must start 1024-aligned for the swizzle.
  EXPECT_EQ(Cfg::kStageBytesA % 1024, 0u);
  EXPECT_EQ(Cfg::kStageBytesB % 1024, 0u);
  EXPECT_EQ(Cfg::kOffB % 1024, 0u);
  EXPECT_EQ(Cfg::kOffEpi % 1024, 0u);
  EXPECT_EQ((64u * 128u) % 1024u, 0u);
  // TMA transaction count limit of an mbarrier phase (2^20 - 1).
  EXPECT_LT(Cfg::kStageBytes, 1u << 20);
  // setmaxnreg budgets: within the register file, and exactly the launch allocation (168 x 384)
  // so that .inc never waits.
  EXPECT_EQ(128 * Cfg::kProducerRegs + 256 * Cfg::kConsumerRegs, 168u * 384u);
  EXPECT_EQ(128 * Cfg::kHookProducerRegs + 256 * Cfg::kHookConsumerRegs, 168u * 384u);
}

TEST(GemmLayout, SharedMemoryMaps) {
  using namespace mkccl;
  checkConfig<GemmCfg<dev::Bf16, 256, EpilogueTmaStore>>(4);
  checkConfig<GemmCfg<dev::F16, 128, EpilogueTmaStore>>(6);
  checkConfig<GemmCfg<dev::Bf16, 128, EpilogueRegStore>>(7);
  // The fp8 block-scaled kernels (fp8_op.cuh): a 128-wide e4m3 k-block is 128 bytes per row.
  checkConfig<Fp8BlockCfg<128>>(6);
  checkConfig<Fp8BlockCfg<192>>(4);
}

struct SchedCase {
  int mBlocks, nBlocks, clusterM, group, rotate, numClusters, clusterN = 1;
};

// Clusters of clusterM x clusterN CTAs (rank rm + clusterM * rn): every tile once, and the CTAs of a
// cluster in step, as multicast needs: those of one rn on the same N-block (the W tile they share),
// those of one rm on the same M-block (the A tile), the same number of tiles each.
TEST(TileScheduler, EveryTileOnceAndClustersInStep) {
  const SchedCase cases[] = {{64, 32, 2, 8, 0, 66},    {64, 8, 2, 8, 0, 66},    {33, 5, 2, 8, 0, 7},
                             {33, 5, 2, 8, 3, 7},      {1, 1, 2, 8, 0, 1},      {1, 1, 1, 16, 0, 132},
                             {7, 3, 1, 16, 2, 4},      {128, 64, 2, 8, 17, 64}, {5, 100, 1, 16, 0, 132},
                             {9, 9, 2, 3, 2, 10},      {8, 13, 2, 8, 0, 28, 2}, {8, 13, 1, 16, 0, 56, 2},
                             {3, 7, 2, 8, 0, 32, 4},   {9, 9, 2, 3, 2, 5, 2},   {33, 29, 2, 8, 0, 16, 4},
                             {1, 5, 1, 16, 0, 3, 4},   {16, 64, 1, 8, 0, 33, 4}};
  for (const SchedCase& sc : cases) {
    SCOPED_TRACE(std::to_string(sc.mBlocks) + "x" + std::to_string(sc.nBlocks) + " cluster " +
                 std::to_string(sc.clusterM) + "x" + std::to_string(sc.clusterN));
    mkccl::dev::TileSchedParams p{sc.mBlocks, sc.nBlocks, sc.clusterM, sc.group, sc.rotate, sc.clusterN};
    const int cs = sc.clusterM * sc.clusterN;
    const int mPad = (sc.mBlocks + sc.clusterM - 1) / sc.clusterM * sc.clusterM;
    const int nPad = (sc.nBlocks + sc.clusterN - 1) / sc.clusterN * sc.clusterN;
    std::map<std::pair<int, int>, int> visits;
    for (int c = 0; c < sc.numClusters; ++c) {
      std::vector<std::vector<mkccl::dev::TileCoord>> perRank(cs);
      for (int r = 0; r < cs; ++r) {
        mkccl::dev::GroupedTileScheduler s(p, c, sc.numClusters, r);
        mkccl::dev::TileCoord t;
        while (s.next(t)) {
          ASSERT_GE(t.m, 0);
          ASSERT_LT(t.m, mPad);
          ASSERT_GE(t.n, 0);
          ASSERT_LT(t.n, nPad);
          ASSERT_EQ(t.m % sc.clusterM, r % sc.clusterM);
          ASSERT_EQ(t.n % sc.clusterN, r / sc.clusterM);
          perRank[r].push_back(t);
          ++visits[{t.m, t.n}];
        }
      }
      for (int r = 1; r < cs; ++r) {
        const int rm = r % sc.clusterM, rn = r / sc.clusterM;
        ASSERT_EQ(perRank[r].size(), perRank[0].size());
        for (size_t i = 0; i < perRank[0].size(); ++i) {
          EXPECT_EQ(perRank[r][i].n, perRank[0][i].n + rn);
          EXPECT_EQ(perRank[r][i].m, perRank[0][i].m + rm);
        }
      }
    }
    for (int m = 0; m < sc.mBlocks; ++m)
      for (int n = 0; n < sc.nBlocks; ++n) EXPECT_EQ((visits[{m, n}]), 1) << "tile " << m << "," << n;
    // The padding CTAs' out-of-range tiles, once each.
    EXPECT_EQ(visits.size(), static_cast<size_t>(mPad) * nPad);
    for (const auto& v : visits) EXPECT_EQ(v.second, 1);
  }
}

TEST(TileScheduler, RotationStartsAtTheRequestedRow) {
  mkccl::dev::TileSchedParams p{16, 4, 2, 2, 5, };
  mkccl::dev::GroupedTileScheduler s(p, 0, 1, 0);
  mkccl::dev::TileCoord t;
  ASSERT_TRUE(s.next(t));
  EXPECT_EQ(t.m, 5 * 2);
  EXPECT_EQ(t.n, 0);
}

// Inside a band, consecutive tiles walk down the band's rows before moving to the next column.
TEST(TileScheduler, GroupedOrderWalksTheBand) {
  mkccl::dev::TileSchedParams p{64, 32, 1, 16, 0};
  std::vector<mkccl::dev::TileCoord> order;
  for (int c = 0; c < 40; ++c) {
    mkccl::dev::GroupedTileScheduler s(p, c, 1 << 20, 0);
    mkccl::dev::TileCoord t;
    ASSERT_TRUE(s.next(t));
    order.push_back(t);
  }
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(order[i].m, i % 16);
    EXPECT_EQ(order[i].n, i / 16);
  }
}

}  // namespace
