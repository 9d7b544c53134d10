/*
 * Fuzz harness for the engines' input path in a pull (spec 9.15): the
 * pipelined harness of fuzz_pipe_input.c with the tree pulled, the
 * receiver the client (HELLO, PULL_REQUEST) and the sender the server
 * (HELLO_ACK, PULL_REPLY, its storage asked about each path), over the
 * same fuzzer-run link and with the same properties.
 */
#define PIPE_PULL 1
#include "fuzz_pipe_input.c"
