/* mvm's exit port (the port is the board's: x86 0x501): a one-byte
 * write is the guest's exit status; mvm stops the VM and exits with exactly
 * that value. */
#ifndef MVM_EXITPORT_H
#define MVM_EXITPORT_H

#include "vmm/base/iobus.h"

struct vm;

extern const struct io_ops exitport_io_ops;
extern const struct io_ops exitport_sink_ops;   /* reads all-ones, writes ignored */

#include <stdint.h>

/* The exit port at I/O port `port`, and a sink at sink_port whose writes
 * are ignored (x86: the POST port 0x80, which Linux writes for I/O
 * delays). 0 or -errno. */
int exitport_create(struct vm *vm, uint16_t port, uint16_t sink_port);

#endif
