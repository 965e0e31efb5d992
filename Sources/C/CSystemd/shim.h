#ifndef HARK_CSYSTEMD_SHIM_H
#define HARK_CSYSTEMD_SHIM_H
// sd_notify(3) and sd_watchdog_enabled(3) from libsystemd (Debian libsystemd-dev).
#include <systemd/sd-daemon.h>
#endif
