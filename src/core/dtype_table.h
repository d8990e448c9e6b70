/* SPDX-License-Identifier: MIT */
/* The GGML block formats as one table (X-macro), the single source of the
 * dtype <-> ggml type id mapping and the block sizes in the core layer.
 *
 *   X(UPPER, lower, ggml_id, block_elems, block_bytes)
 *
 * UPPER pastes into FC_<UPPER> (fc_dtype) and FCQ_<UPPER> (src/quant's
 * fcq_type); lower into fcq_block_<lower> and the name "lower". Core cannot
 * include src/quant (a higher layer), so src/tensor/quant_tensor.c
 * static-asserts every row against quant's ids and block structs, and
 * tests/runtime/test_quant_tensor.c checks it against fcq_traits_of at run
 * time. Order = the fc_dtype enum order. */
#ifndef FC_CORE_DTYPE_TABLE_H
#define FC_CORE_DTYPE_TABLE_H

#define FC_BLOCK_DTYPE_TABLE(X)          \
    X(Q4_0, q4_0, 2, 32, 18)            \
    X(Q4_1, q4_1, 3, 32, 20)            \
    X(Q5_0, q5_0, 6, 32, 22)            \
    X(Q5_1, q5_1, 7, 32, 24)            \
    X(Q8_0, q8_0, 8, 32, 34)            \
    X(Q8_1, q8_1, 9, 32, 36)            \
    X(Q2_K, q2_K, 10, 256, 84)          \
    X(Q3_K, q3_K, 11, 256, 110)         \
    X(Q4_K, q4_K, 12, 256, 144)         \
    X(Q5_K, q5_K, 13, 256, 176)         \
    X(Q6_K, q6_K, 14, 256, 210)         \
    X(Q8_K, q8_K, 15, 256, 292)         \
    X(IQ2_XXS, iq2_xxs, 16, 256, 66)    \
    X(IQ2_XS, iq2_xs, 17, 256, 74)      \
    X(IQ2_S, iq2_s, 22, 256, 82)        \
    X(IQ3_XXS, iq3_xxs, 18, 256, 98)    \
    X(IQ3_S, iq3_s, 21, 256, 110)       \
    X(IQ1_S, iq1_s, 19, 256, 50)        \
    X(IQ1_M, iq1_m, 29, 256, 56)        \
    X(IQ4_NL, iq4_nl, 20, 32, 18)       \
    X(IQ4_XS, iq4_xs, 23, 256, 136)     \
    X(TQ1_0, tq1_0, 34, 256, 54)        \
    X(TQ2_0, tq2_0, 35, 256, 66)        \
    X(MXFP4, mxfp4, 39, 32, 17)         \
    X(NVFP4, nvfp4, 40, 64, 36)         \
    X(Q1_0, q1_0, 41, 128, 18)          \
    X(Q2_0, q2_0, 42, 64, 18)

/* ggml ids of the element dtypes (u8 and bool have none). */
#define FC_GGML_ID_F32 0
#define FC_GGML_ID_F16 1
#define FC_GGML_ID_I8 24
#define FC_GGML_ID_I16 25
#define FC_GGML_ID_I32 26
#define FC_GGML_ID_I64 27
#define FC_GGML_ID_F64 28
#define FC_GGML_ID_BF16 30
#define FC_GGML_ID_LIMIT 43 /* one past the largest id */

#endif
