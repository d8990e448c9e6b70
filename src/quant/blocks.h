/* Fucina: the wire layouts of GGML's block-quantized formats.
 *
 * Each struct is one block exactly as it sits in a GGUF file (little-endian,
 * no padding: the static asserts pin every size to ggml's). Half-precision
 * scales are raw binary16 bit patterns (uint16_t), converted with
 * fc_f16_to_f32 at use; nothing here is aligned beyond 1 or 2 bytes, so
 * kernels load fields with memcpy or unaligned vector loads.
 *
 * Element i of a block is at the position the format's decoder defines; the
 * comments say only what each field holds. */
#ifndef FUCINA_QUANT_BLOCKS_H
#define FUCINA_QUANT_BLOCKS_H

#include <stdint.h>

#define FCQ_QK_K 256 /* super-block of the K, IQ and TQ formats */
#define FCQ_K_SCALE_SIZE 12

/* --- 32-element formats (and q1_0, q2_0, nvfp4) ------------------------------------- */
typedef struct { uint16_t d; uint8_t qs[16]; } fcq_block_q4_0;            /* x = d * (q - 8) */
typedef struct { uint16_t d, m; uint8_t qs[16]; } fcq_block_q4_1;         /* x = d * q + m */
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; } fcq_block_q5_0; /* x = d * (q - 16) */
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; } fcq_block_q5_1;
typedef struct { uint16_t d; int8_t qs[32]; } fcq_block_q8_0;              /* x = d * q */
typedef struct { uint16_t d, s; int8_t qs[32]; } fcq_block_q8_1;           /* s = d * sum(q) */
typedef struct { uint16_t d; uint8_t qs[16]; } fcq_block_iq4_nl;          /* x = d * kvalues[q] */
typedef struct { uint8_t e; uint8_t qs[16]; } fcq_block_mxfp4;            /* E8M0 scale, E2M1 values */
typedef struct { uint8_t d[4]; uint8_t qs[32]; } fcq_block_nvfp4;         /* 64 elements: UE4M3 scale per 16 */
typedef struct { uint16_t d; uint8_t qs[16]; } fcq_block_q1_0;            /* 128 elements, 1 bit each */
typedef struct { uint16_t d; uint8_t qs[16]; } fcq_block_q2_0;            /* 64 elements, 2 bits each */

/* --- 256-element super-blocks --------------------------------------------------------- */
typedef struct { uint8_t scales[16]; uint8_t qs[64]; uint16_t d, dmin; } fcq_block_q2_K;
typedef struct { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; uint16_t d; } fcq_block_q3_K;
typedef struct { uint16_t d, dmin; uint8_t scales[FCQ_K_SCALE_SIZE]; uint8_t qs[128]; } fcq_block_q4_K;
typedef struct { uint16_t d, dmin; uint8_t scales[FCQ_K_SCALE_SIZE]; uint8_t qh[32]; uint8_t qs[128]; } fcq_block_q5_K;
typedef struct { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; } fcq_block_q6_K;
/* Activations only (never in files in practice): f32 scale, bsums[j] = sum of qs[16j..16j+16). */
typedef struct { float d; int8_t qs[256]; int16_t bsums[16]; } fcq_block_q8_K;
typedef struct { uint8_t qs[48]; uint8_t qh[4]; uint16_t d; } fcq_block_tq1_0;  /* base-3 digits, 5 per byte */
typedef struct { uint8_t qs[64]; uint16_t d; } fcq_block_tq2_0;
typedef struct { uint16_t d; uint16_t qs[32]; } fcq_block_iq2_xxs;
typedef struct { uint16_t d; uint16_t qs[32]; uint8_t scales[8]; } fcq_block_iq2_xs;
typedef struct { uint16_t d; uint8_t qs[64]; uint8_t qh[8]; uint8_t scales[8]; } fcq_block_iq2_s;
typedef struct { uint16_t d; uint8_t qs[96]; } fcq_block_iq3_xxs;
typedef struct { uint16_t d; uint8_t qs[64]; uint8_t qh[8]; uint8_t signs[32]; uint8_t scales[4]; } fcq_block_iq3_s;
typedef struct { uint16_t d; uint8_t qs[32]; uint16_t qh[8]; } fcq_block_iq1_s;
/* iq1_m has no d field: its f16 scale is spread over the top nibbles of scales[]. */
typedef struct { uint8_t qs[32]; uint8_t qh[16]; uint8_t scales[8]; } fcq_block_iq1_m;
typedef struct { uint16_t d; uint16_t scales_h; uint8_t scales_l[4]; uint8_t qs[128]; } fcq_block_iq4_xs;

_Static_assert(sizeof(fcq_block_q4_0) == 18, "q4_0 block");
_Static_assert(sizeof(fcq_block_q4_1) == 20, "q4_1 block");
_Static_assert(sizeof(fcq_block_q5_0) == 22, "q5_0 block");
_Static_assert(sizeof(fcq_block_q5_1) == 24, "q5_1 block");
_Static_assert(sizeof(fcq_block_q8_0) == 34, "q8_0 block");
_Static_assert(sizeof(fcq_block_q8_1) == 36, "q8_1 block");
_Static_assert(sizeof(fcq_block_iq4_nl) == 18, "iq4_nl block");
_Static_assert(sizeof(fcq_block_mxfp4) == 17, "mxfp4 block");
_Static_assert(sizeof(fcq_block_nvfp4) == 36, "nvfp4 block");
_Static_assert(sizeof(fcq_block_q1_0) == 18, "q1_0 block");
_Static_assert(sizeof(fcq_block_q2_0) == 18, "q2_0 block");
_Static_assert(sizeof(fcq_block_q2_K) == 84, "q2_K block");
_Static_assert(sizeof(fcq_block_q3_K) == 110, "q3_K block");
_Static_assert(sizeof(fcq_block_q4_K) == 144, "q4_K block");
_Static_assert(sizeof(fcq_block_q5_K) == 176, "q5_K block");
_Static_assert(sizeof(fcq_block_q6_K) == 210, "q6_K block");
_Static_assert(sizeof(fcq_block_q8_K) == 292, "q8_K block");
_Static_assert(sizeof(fcq_block_tq1_0) == 54, "tq1_0 block");
_Static_assert(sizeof(fcq_block_tq2_0) == 66, "tq2_0 block");
_Static_assert(sizeof(fcq_block_iq2_xxs) == 66, "iq2_xxs block");
_Static_assert(sizeof(fcq_block_iq2_xs) == 74, "iq2_xs block");
_Static_assert(sizeof(fcq_block_iq2_s) == 82, "iq2_s block");
_Static_assert(sizeof(fcq_block_iq3_xxs) == 98, "iq3_xxs block");
_Static_assert(sizeof(fcq_block_iq3_s) == 110, "iq3_s block");
_Static_assert(sizeof(fcq_block_iq1_s) == 50, "iq1_s block");
_Static_assert(sizeof(fcq_block_iq1_m) == 56, "iq1_m block");
_Static_assert(sizeof(fcq_block_iq4_xs) == 136, "iq4_xs block");

#endif
