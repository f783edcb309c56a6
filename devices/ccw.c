/* Data areas of channel commands: see ccw.h. */
#include "devices/ccw.h"
#include "devices/iov.h"

uint32_t ccw_data_read(const struct ccw_data *d, void *buf, uint32_t len)
{
	return (uint32_t)iov_read(d->seg, d->n, 0, buf, len < d->count ? len : d->count);
}

uint32_t ccw_data_write(const struct ccw_data *d, const void *buf, uint32_t len)
{
	return (uint32_t)iov_write(d->seg, d->n, 0, buf, len < d->count ? len : d->count);
}
