/* SPDX-License-Identifier: MIT */
/* Fucina: the table of GGML block formats (see quant.h).
 *
 * Block sizes are ggml's (checked against ggml_blck_size / ggml_type_size by
 * tests/runtime/test_quant_codec.c). dot_partner is ggml-cpu's vec_dot_type:
 * the format the activations are quantized to before the integer dot. q8_K
 * has none in ggml (it is itself the activation format); it names itself. */
#include <ctype.h>
#include <string.h>

#include "quant/quant.h"

#define ROW(id, nm, elems, bytes, dec, enc, partner) \
    [id] = {.type = id, .name = nm, .block_elems = elems, .block_bytes = bytes, .decode = dec, .encode = enc, .dot_partner = partner}

static const fcq_traits table[FCQ_TYPE_LIMIT] = {
    ROW(FCQ_Q4_0, "q4_0", 32, sizeof(fcq_block_q4_0), fcq_decode_q4_0, fcq_encode_q4_0, FCQ_Q8_0),
    ROW(FCQ_Q4_1, "q4_1", 32, sizeof(fcq_block_q4_1), fcq_decode_q4_1, fcq_encode_q4_1, FCQ_Q8_1),
    ROW(FCQ_Q5_0, "q5_0", 32, sizeof(fcq_block_q5_0), fcq_decode_q5_0, fcq_encode_q5_0, FCQ_Q8_0),
    ROW(FCQ_Q5_1, "q5_1", 32, sizeof(fcq_block_q5_1), fcq_decode_q5_1, fcq_encode_q5_1, FCQ_Q8_1),
    ROW(FCQ_Q8_0, "q8_0", 32, sizeof(fcq_block_q8_0), fcq_decode_q8_0, fcq_encode_q8_0, FCQ_Q8_0),
    ROW(FCQ_Q8_1, "q8_1", 32, sizeof(fcq_block_q8_1), fcq_decode_q8_1, fcq_encode_q8_1, FCQ_Q8_1),
    ROW(FCQ_Q2_K, "q2_K", FCQ_QK_K, sizeof(fcq_block_q2_K), fcq_decode_q2_K, fcq_encode_q2_K, FCQ_Q8_K),
    ROW(FCQ_Q3_K, "q3_K", FCQ_QK_K, sizeof(fcq_block_q3_K), fcq_decode_q3_K, fcq_encode_q3_K, FCQ_Q8_K),
    ROW(FCQ_Q4_K, "q4_K", FCQ_QK_K, sizeof(fcq_block_q4_K), fcq_decode_q4_K, fcq_encode_q4_K, FCQ_Q8_K),
    ROW(FCQ_Q5_K, "q5_K", FCQ_QK_K, sizeof(fcq_block_q5_K), fcq_decode_q5_K, fcq_encode_q5_K, FCQ_Q8_K),
    ROW(FCQ_Q6_K, "q6_K", FCQ_QK_K, sizeof(fcq_block_q6_K), fcq_decode_q6_K, fcq_encode_q6_K, FCQ_Q8_K),
    ROW(FCQ_Q8_K, "q8_K", FCQ_QK_K, sizeof(fcq_block_q8_K), fcq_decode_q8_K, fcq_encode_q8_K, FCQ_Q8_K),
    ROW(FCQ_IQ2_XXS, "iq2_xxs", FCQ_QK_K, sizeof(fcq_block_iq2_xxs), fcq_decode_iq2_xxs, NULL, FCQ_Q8_K),
    ROW(FCQ_IQ2_XS, "iq2_xs", FCQ_QK_K, sizeof(fcq_block_iq2_xs), fcq_decode_iq2_xs, NULL, FCQ_Q8_K),
    ROW(FCQ_IQ3_XXS, "iq3_xxs", FCQ_QK_K, sizeof(fcq_block_iq3_xxs), fcq_decode_iq3_xxs, NULL, FCQ_Q8_K),
    ROW(FCQ_IQ1_S, "iq1_s", FCQ_QK_K, sizeof(fcq_block_iq1_s), fcq_decode_iq1_s, NULL, FCQ_Q8_K),
    ROW(FCQ_IQ4_NL, "iq4_nl", 32, sizeof(fcq_block_iq4_nl), fcq_decode_iq4_nl, fcq_encode_iq4_nl, FCQ_Q8_0),
    ROW(FCQ_IQ3_S, "iq3_s", FCQ_QK_K, sizeof(fcq_block_iq3_s), fcq_decode_iq3_s, NULL, FCQ_Q8_K),
    ROW(FCQ_IQ2_S, "iq2_s", FCQ_QK_K, sizeof(fcq_block_iq2_s), fcq_decode_iq2_s, NULL, FCQ_Q8_K),
    ROW(FCQ_IQ4_XS, "iq4_xs", FCQ_QK_K, sizeof(fcq_block_iq4_xs), fcq_decode_iq4_xs, fcq_encode_iq4_xs, FCQ_Q8_K),
    ROW(FCQ_IQ1_M, "iq1_m", FCQ_QK_K, sizeof(fcq_block_iq1_m), fcq_decode_iq1_m, NULL, FCQ_Q8_K),
    ROW(FCQ_TQ1_0, "tq1_0", FCQ_QK_K, sizeof(fcq_block_tq1_0), fcq_decode_tq1_0, fcq_encode_tq1_0, FCQ_Q8_K),
    ROW(FCQ_TQ2_0, "tq2_0", FCQ_QK_K, sizeof(fcq_block_tq2_0), fcq_decode_tq2_0, fcq_encode_tq2_0, FCQ_Q8_K),
    ROW(FCQ_MXFP4, "mxfp4", 32, sizeof(fcq_block_mxfp4), fcq_decode_mxfp4, fcq_encode_mxfp4, FCQ_Q8_0),
    ROW(FCQ_NVFP4, "nvfp4", 64, sizeof(fcq_block_nvfp4), fcq_decode_nvfp4, fcq_encode_nvfp4, FCQ_Q8_0),
    ROW(FCQ_Q1_0, "q1_0", 128, sizeof(fcq_block_q1_0), fcq_decode_q1_0, fcq_encode_q1_0, FCQ_Q8_0),
    ROW(FCQ_Q2_0, "q2_0", 64, sizeof(fcq_block_q2_0), fcq_decode_q2_0, fcq_encode_q2_0, FCQ_Q8_0),
};

const fcq_traits *fcq_traits_of(uint32_t id)
{
    if (id >= FCQ_TYPE_LIMIT || table[id].name == NULL) return NULL; /* f32, f16, i8, removed ids */
    return &table[id];
}

int fcq_type_parse(const char *name, fcq_type *out)
{
    if (name == NULL) return 0;
    for (uint32_t id = 0; id < FCQ_TYPE_LIMIT; id++) {
        const char *t = table[id].name;
        if (t == NULL) continue;
        size_t i = 0;
        while (t[i] && name[i] && tolower((unsigned char)t[i]) == tolower((unsigned char)name[i])) i++;
        if (t[i] == 0 && name[i] == 0) {
            if (out) *out = (fcq_type)id;
            return 1;
        }
    }
    return 0;
}

fcq_encode_w_fn fcq_weighted_encoder(uint32_t id)
{
    if (!fcq_traits_of(id)) return NULL;
    switch ((fcq_type)id) {
    case FCQ_Q4_0: return fcq_encode_q4_0_w;
    case FCQ_Q4_1: return fcq_encode_q4_1_w;
    case FCQ_Q5_0: return fcq_encode_q5_0_w;
    case FCQ_Q5_1: return fcq_encode_q5_1_w;
    case FCQ_Q2_K: return fcq_encode_q2_K_w;
    case FCQ_Q3_K: return fcq_encode_q3_K_w;
    case FCQ_Q4_K: return fcq_encode_q4_K_w;
    case FCQ_Q5_K: return fcq_encode_q5_K_w;
    case FCQ_Q6_K: return fcq_encode_q6_K_w;
    case FCQ_IQ4_NL: return fcq_encode_iq4_nl_w;
    case FCQ_IQ4_XS: return fcq_encode_iq4_xs_w;
    /* the weights do not enter these formats' encoders in ggml */
    case FCQ_Q8_0: case FCQ_Q8_1: case FCQ_Q8_K: case FCQ_TQ1_0: case FCQ_TQ2_0: case FCQ_MXFP4: case FCQ_NVFP4:
    case FCQ_Q1_0: case FCQ_Q2_0: return NULL;
    /* no encoder here (ggml's grid searches) */
    case FCQ_IQ2_XXS: case FCQ_IQ2_XS: case FCQ_IQ3_XXS: case FCQ_IQ1_S: case FCQ_IQ3_S: case FCQ_IQ2_S:
    case FCQ_IQ1_M: return NULL;
    }
    return NULL;
}
