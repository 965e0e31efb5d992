#ifndef HARK_CGPIO_SHIM_H
#define HARK_CGPIO_SHIM_H
// GPIO two ways: libgpiod 1.6 (Debian libgpiod-dev; Raspberry Pi OS bookworm) and the kernel's GPIO v2
// character-device uAPI (linux/gpio.h; trixie and later, where libgpiod 2.x changed its whole API).
// Also the evdev input_event layout (linux/input.h) for gpio-keys buttons and the SPI ioctls for APA102.
#include <gpiod.h>
#include <linux/gpio.h>
#include <linux/input.h>
#include <linux/spi/spidev.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>

// ioctl is variadic, which Swift cannot call, and the request numbers are function-like macros:
// one typed wrapper per request.

/// ioctl(fd, GPIO_GET_CHIPINFO_IOCTL, info): the chip's name, label and line count.
static inline int hark_gpio_chip_info(int fd, struct gpiochip_info *info) {
    return ioctl(fd, GPIO_GET_CHIPINFO_IOCTL, info);
}
/// ioctl(fd, GPIO_V2_GET_LINE_IOCTL, request): requests lines; on success request->fd is the line fd.
static inline int hark_gpio_v2_get_line(int fd, struct gpio_v2_line_request *request) {
    return ioctl(fd, GPIO_V2_GET_LINE_IOCTL, request);
}
/// ioctl(line_fd, GPIO_V2_LINE_GET_VALUES_IOCTL, values): reads the lines selected by values->mask.
static inline int hark_gpio_v2_get_values(int fd, struct gpio_v2_line_values *values) {
    return ioctl(fd, GPIO_V2_LINE_GET_VALUES_IOCTL, values);
}
/// ioctl(line_fd, GPIO_V2_LINE_SET_VALUES_IOCTL, values): drives the lines selected by values->mask.
static inline int hark_gpio_v2_set_values(int fd, struct gpio_v2_line_values *values) {
    return ioctl(fd, GPIO_V2_LINE_SET_VALUES_IOCTL, values);
}
/// ioctl(fd, SPI_IOC_WR_MAX_SPEED_HZ, &hz): the SPI clock for this device.
static inline int hark_spi_set_speed(int fd, uint32_t *hz) {
    return ioctl(fd, SPI_IOC_WR_MAX_SPEED_HZ, hz);
}
/// ioctl(fd, SPI_IOC_WR_MODE, &mode): the SPI mode (APA102 wants mode 0).
static inline int hark_spi_set_mode(int fd, uint8_t *mode) {
    return ioctl(fd, SPI_IOC_WR_MODE, mode);
}

/// ioctl(fd, EVIOCSCLOCKID, &clock): evdev timestamps on this clock (CLOCK_MONOTONIC, like GPIO events).
static inline int hark_evdev_set_clock(int fd, int *clock) {
    return ioctl(fd, EVIOCSCLOCKID, clock);
}

// Layout facts the Swift side encodes and decodes by hand, checked against the C compiler in the tests.
/// sizeof(struct gpio_v2_line_request)
static inline size_t hark_gpio_v2_line_request_size(void) { return sizeof(struct gpio_v2_line_request); }
/// sizeof(struct gpio_v2_line_event)
static inline size_t hark_gpio_v2_line_event_size(void) { return sizeof(struct gpio_v2_line_event); }
/// sizeof(struct input_event)
static inline size_t hark_input_event_size(void) { return sizeof(struct input_event); }
#endif
