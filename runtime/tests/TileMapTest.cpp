//===- TileMapTest.cpp - Tile maps of lists of very different sizes -------===//
#include "TestUtil.h"

#include <cstdint>
#include <vector>

namespace {

TEST(TileMap, VeryDifferentSizes) {
  // Tiles of 4096: 0 -> 0 tiles, 1 -> 1, 4095 -> 1, 4096 -> 1, 4097 -> 2,
  // 2^31 + 5 -> 2^19 + 1 = 524289, 3 -> 1, 0 -> 0, 2^20 -> 256.
  const int64_t numels[] = {0, 1, 4095, 4096, 4097, 2147483653LL, 3, 0, 1 << 20};
  const int64_t wantFirst[] = {0, 0, 1, 2, 3, 5, 524294, 524295, 524295};
  const int64_t wantTotal = 524551;
  int64_t total = -1;
  ASSERT_EQ(qopt_tile_map_build(numels, 9, 4096, nullptr, nullptr, 0, &total),
            QOPT_SUCCESS);
  EXPECT_EQ(total, wantTotal);

  std::vector<int64_t> first(9, -1);
  std::vector<int32_t> map(static_cast<size_t>(wantTotal), -1);
  ASSERT_EQ(qopt_tile_map_build(numels, 9, 4096, first.data(), map.data(),
                                map.size(), &total),
            QOPT_SUCCESS)
      << qopt_last_error();
  for (int k = 0; k < 9; ++k)
    EXPECT_EQ(first[k], wantFirst[k]) << "tensor " << k;
  // Every tile belongs to the tensor whose range holds it.
  EXPECT_EQ(map[0], 1);
  EXPECT_EQ(map[1], 2);
  EXPECT_EQ(map[2], 3);
  EXPECT_EQ(map[3], 4);
  EXPECT_EQ(map[4], 4);
  EXPECT_EQ(map[5], 5);
  EXPECT_EQ(map[524293], 5);
  EXPECT_EQ(map[524294], 6);
  EXPECT_EQ(map[524295], 8);
  EXPECT_EQ(map[524550], 8);
  int64_t counts[9] = {};
  for (int32_t k : map) {
    ASSERT_GE(k, 0);
    ASSERT_LT(k, 9);
    ++counts[k];
  }
  const int64_t wantCounts[] = {0, 1, 1, 1, 2, 524289, 1, 0, 256};
  for (int k = 0; k < 9; ++k)
    EXPECT_EQ(counts[k], wantCounts[k]) << "tensor " << k;
}

TEST(TileMap, EmptyListHasNoTiles) {
  int64_t total = -1;
  ASSERT_EQ(qopt_tile_map_build(nullptr, 0, 1024, nullptr, nullptr, 0, &total),
            QOPT_SUCCESS);
  EXPECT_EQ(total, 0);
}

TEST(TileMap, Errors) {
  const int64_t numels[] = {10, -3};
  int64_t total = 0;
  EXPECT_EQ(qopt_tile_map_build(numels, 2, 1024, nullptr, nullptr, 0, &total),
            QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(qopt_last_error(), "tensor 1: numel -3 is negative");
  EXPECT_EQ(qopt_tile_map_build(numels, 1, 0, nullptr, nullptr, 0, &total),
            QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(qopt_last_error(), "tile_elements must be positive, got 0");
  int32_t map[1];
  const int64_t two[] = {2000, 1};
  EXPECT_EQ(qopt_tile_map_build(two, 2, 1024, nullptr, map, 1, &total),
            QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(qopt_last_error(), "tile_map_capacity 1 < 3 tiles");
  const int64_t huge[] = {INT64_MAX, INT64_MAX};
  EXPECT_EQ(qopt_tile_map_build(huge, 2, 1, nullptr, nullptr, 0, &total),
            QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(qopt_last_error()).find("overflows int64"), std::string::npos);
  // A tensor count past INT32_MAX is refused before anything is sized by it.
  EXPECT_EQ(qopt_tile_map_build(numels, SIZE_MAX, 1024, nullptr, nullptr, 0, &total),
            QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(qopt_last_error()).find("tensors in one launch: at most 2^31 - 1"),
            std::string::npos)
      << qopt_last_error();
}

} // namespace

namespace {

// The grid of a step (qopt_launch_grid): whole waves while each block keeps
// at least QOPT_MIN_TILES_PER_BLOCK (24) tiles, up to launch.waves of them.
// Worked out by hand for 132 blocks per wave (an H200, one block per SM).
TEST(LaunchGrid, WavesWhileEachBlockKeepsItsTiles) {
  qopt_launch_info four{};
  four.waves = 4;
  qopt_launch_info one{};
  one.waves = 1;
  // 64 Mi elements in tiles of 4096: 16384 tiles, 16384 / (132 * 24) = 5.2
  // waves' worth, capped at 4: 528 blocks of 31 tiles.
  EXPECT_EQ(qopt_launch_grid(&four, 132, 16384), 528);
  EXPECT_EQ(qopt_launch_grid(&one, 132, 16384), 132);
  // 16 Mi: 4096 tiles, 1.29 waves' worth: one wave (31 tiles per block).
  EXPECT_EQ(qopt_launch_grid(&four, 132, 4096), 132);
  // 2 waves' worth exactly, and one tile short of it.
  EXPECT_EQ(qopt_launch_grid(&four, 132, 2 * 132 * 24), 264);
  EXPECT_EQ(qopt_launch_grid(&four, 132, 2 * 132 * 24 - 1), 132);
  // Fewer tiles than one wave's blocks: one block per tile.
  EXPECT_EQ(qopt_launch_grid(&four, 132, 100), 100);
  EXPECT_EQ(qopt_launch_grid(&one, 132, 1), 1);
  // No tiles, no blocks, no launch info, or waves 0 (read as 1).
  EXPECT_EQ(qopt_launch_grid(&four, 132, 0), 0);
  EXPECT_EQ(qopt_launch_grid(&four, 0, 16384), 0);
  EXPECT_EQ(qopt_launch_grid(nullptr, 132, 16384), 0);
  qopt_launch_info none{};
  EXPECT_EQ(qopt_launch_grid(&none, 132, 16384), 132);
  // Never past cuLaunchKernel's gridDim.x limit, 2^31 - 1.
  qopt_launch_info many{};
  many.waves = 1024;
  EXPECT_EQ(qopt_launch_grid(&many, INT32_MAX, INT64_MAX), INT32_MAX);
  EXPECT_EQ(qopt_launch_grid(&many, INT64_MAX, INT64_MAX), INT32_MAX);
}

// A kernel's own minimum (launch.min_tiles_per_block; 0 reads as 24): 96
// keeps 64 Mi (124 tiles per block in one wave) at one wave, and gives 256
// Mi (65536 tiles, 5.2 waves' worth) 4 and the GPT-2 list (30381 tiles,
// 2.4 waves' worth) 2.
TEST(LaunchGrid, KernelsOwnMinimumOfTilesPerBlock) {
  qopt_launch_info l{};
  l.waves = 4;
  l.min_tiles_per_block = 96;
  EXPECT_EQ(qopt_launch_grid(&l, 132, 16384), 132);
  EXPECT_EQ(qopt_launch_grid(&l, 132, 65536), 528);
  EXPECT_EQ(qopt_launch_grid(&l, 132, 30381), 264);
  EXPECT_EQ(qopt_launch_grid(&l, 132, 2 * 132 * 96), 264);
  EXPECT_EQ(qopt_launch_grid(&l, 132, 2 * 132 * 96 - 1), 132);
  l.min_tiles_per_block = 0;
  EXPECT_EQ(qopt_launch_grid(&l, 132, 16384), 528);
  l.min_tiles_per_block = -5;
  EXPECT_EQ(qopt_launch_grid(&l, 132, 16384), 528);
}

} // namespace
