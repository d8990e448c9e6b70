/* SPDX-License-Identifier: MIT */
/* Fucina: the umbrella header. */
#ifndef FUCINA_H
#define FUCINA_H

#include "fucina/version.h"
#include "fucina/export.h"
#include "fucina/status.h"
#include "fucina/half.h"
#include "fucina/dispatch.h"
#include "fucina/dtype.h"
#include "fucina/ctx.h"
#include "fucina/tensor.h"
#include "fucina/qtensor.h"
#include "fucina/ops.h"
#include "fucina/shape_ops.h"
#include "fucina/loss.h"
#include "fucina/conv.h"
#include "fucina/nn.h"
#include "fucina/autograd.h"
#include "fucina/checkpoint.h"
#include "fucina/optim.h"
#include "fucina/safetensors.h"
#include "fucina/gguf.h"
#include "fucina/quantize.h"
#include "fucina/llm.h"
#include "fucina/embed.h"
#include "fucina/imatrix.h"
#include "fucina/lora.h"
#include "fucina/tokenizer.h"
#include "fucina/sampler.h"
#include "fucina/chat.h"
#include "fucina/lm_train.h"
#include "fucina/lm_lora.h"
#include "fucina/tokenizer_train.h"
#include "fucina/perplexity.h"

#endif
