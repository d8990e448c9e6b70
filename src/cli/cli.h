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
int fc_cmd_embed(int argc, char **argv);
int fc_cmd_perplexity(int argc, char **argv);
int fc_cmd_imatrix(int argc, char **argv);
int fc_cmd_train_tokenizer(int argc, char **argv);
int fc_cmd_serve(int argc, char **argv);
int fc_cmd_pretrain(int argc, char **argv);
int fc_cmd_sft(int argc, char **argv);
int fc_cmd_finetune(int argc, char **argv);

/* "CMD: WHAT 'ARG' (see --help)" (or without ARG when NULL) on stderr;
 * returns 2, the exit status of bad usage (src/cli/usage.c). */
int fc_cli_usage_error(const char *cmd, const char *what, const char *arg);

#endif
