#include "vmm/run.h"

int main(int argc, char **argv)
{
	return mvm_main(argc, argv);
}
