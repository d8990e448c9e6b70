/* SPDX-License-Identifier: MIT */
/* The fucina command: one function per subcommand. Each returns the process
 * exit status: 0 success, 1 failure, 2 bad usage or bad input. */
#ifndef FC_CLI_CLI_H
#define FC_CLI_CLI_H

int fc_cmd_info(int argc, char **argv);
int fc_cmd_demo(int argc, char **argv);
int fc_cmd_quantize(int argc, char **argv);
int fc_cmd_export_lora(int argc, char **argv);
int fc_cmd_make_model(int argc, char **argv);
int fc_cmd_run(int argc, char **argv);
int fc_cmd_chat(int argc, char **argv);
int fc_cmd_bench(int argc, char **argv);
int fc_cmd_tokenize(int argc, char **argv);
int fc_cmd_train_tokenizer(int argc, char **argv);
int fc_cmd_serve(int argc, char **argv);
int fc_cmd_pretrain(int argc, char **argv);
int fc_cmd_sft(int argc, char **argv);
int fc_cmd_finetune(int argc, char **argv);

#endif
