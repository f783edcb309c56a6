/* Placeholder until the VMM core lands. */
#include <stdio.h>
int main(void)
{
	fputs("mvm: not built yet\n", stderr);
	return 125;
}
