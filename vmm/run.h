/* mvm's whole lifetime: command line, checks, VM and device creation, boot
 * loading, vCPU threads, the main event loop (signals, console input, stop
 * requests) and orderly teardown. Returns the process exit status. */
#ifndef MVM_RUN_H
#define MVM_RUN_H

int mvm_main(int argc, char **argv);

#endif
