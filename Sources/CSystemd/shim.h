// libsystemd's service-manager notifications (sd_notify, sd_watchdog_enabled).
#include <systemd/sd-daemon.h>
