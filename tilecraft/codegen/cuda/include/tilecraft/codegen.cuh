// Small helpers used only by generated code (added with the CUDA code generator).
#pragma once
#include "tilecraft/common.cuh"

namespace tc {

// (floordiv / floormod: math.cuh, with the other arithmetic of the language's semantics)

// Two 16-bit values -> one u32 register (lo in the low half), as mma operands want them.
TC_DEVICE u32 pack2(__half lo, __half hi) {
  return u32(__half_as_ushort(lo)) | (u32(__half_as_ushort(hi)) << 16);
}
#ifndef TC_NO_BF16
TC_DEVICE u32 pack2(__nv_bfloat16 lo, __nv_bfloat16 hi) {
  return u32(__bfloat16_as_ushort(lo)) | (u32(__bfloat16_as_ushort(hi)) << 16);
}
#endif

// Block rasterization for L2 reuse (T.use_swizzle): a bijection of the (gx, gy) grid that walks
// panels of `panel` rows (order 'row') or columns (order 'col') of blocks.
TC_DEVICE void rasterize(int panel, bool col_order, int& bx, int& by) {
  const int gx = gridDim.x, gy = gridDim.y;
  const int lin = blockIdx.x + blockIdx.y * gx;
  if (!col_order) {  // panels of `panel` rows of blocks, walked column by column
    const int per = panel * gx, p = lin / per, off = lin % per;
    const int rows = min(panel, gy - p * panel);
    by = p * panel + off % rows;
    bx = off / rows;
  } else {           // panels of `panel` columns of blocks, walked row by row
    const int per = panel * gy, p = lin / per, off = lin % per;
    const int cols = min(panel, gx - p * panel);
    bx = p * panel + off % cols;
    by = off / cols;
  }
}

}  // namespace tc
