/* mvm's exit port (X86_MVM_EXIT_PORT, 0x501): a one-byte write is the
 * guest's exit status; mvm stops the VM and exits with exactly that value.
 * Also claims the POST port 0x80, which Linux writes for I/O delays. */
#ifndef MVM_EXITPORT_H
#define MVM_EXITPORT_H

#include "vmm/iobus.h"

struct vm;

extern const struct io_ops exitport_io_ops;
extern const struct io_ops exitport_sink_ops;   /* reads all-ones, writes ignored */

int exitport_create(struct vm *vm);

#endif
