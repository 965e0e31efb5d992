#ifndef HARK_CGPIO_SHIM_H
#define HARK_CGPIO_SHIM_H
// GPIO two ways: libgpiod 1.6 (Debian libgpiod-dev; Raspberry Pi OS bookworm) and the kernel's GPIO v2
// character-device uAPI (linux/gpio.h; trixie and later, where libgpiod 2.x changed its whole API).
// Also the evdev input_event layout (linux/input.h) for gpio-keys buttons and the SPI ioctls for APA102.
#include <gpiod.h>
#include <linux/gpio.h>
#include <linux/input.h>
#include <linux/spi/spidev.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <time.h>

// libgpiod 1.x and 2.x share the header name but not the API. Swift calls libgpiod only through the
// hark_gpiod_* wrappers below: with the 1.x header (GPIOD_LINE_BULK_MAX_LINES exists only there) they
// call libgpiod 1.6; with a 2.x header they fail with ENOTSUP, so the package still builds on trixie,
// where the GPIO v2 uAPI backend is the one to use.

/// Bias of a requested line, as the board files name it.
enum hark_gpiod_bias { HARK_GPIOD_BIAS_AS_IS = 0, HARK_GPIOD_BIAS_DISABLED, HARK_GPIOD_BIAS_PULL_UP, HARK_GPIOD_BIAS_PULL_DOWN };

#ifdef GPIOD_LINE_BULK_MAX_LINES
/// One requested line and the chip it belongs to.
struct hark_gpiod_handle {
    struct gpiod_chip *chip;
    struct gpiod_line *line;
};

/// 1 when built against libgpiod 1.x.
static inline int hark_gpiod_available(void) { return 1; }

/// The GPIOD_LINE_REQUEST_FLAG_* bits for a bias and active-low.
static inline int hark_gpiod_flags(int bias, int active_low) {
    int flags = active_low ? GPIOD_LINE_REQUEST_FLAG_ACTIVE_LOW : 0;
    switch (bias) {
    case HARK_GPIOD_BIAS_DISABLED: flags |= GPIOD_LINE_REQUEST_FLAG_BIAS_DISABLE; break;
    case HARK_GPIOD_BIAS_PULL_UP: flags |= GPIOD_LINE_REQUEST_FLAG_BIAS_PULL_UP; break;
    case HARK_GPIOD_BIAS_PULL_DOWN: flags |= GPIOD_LINE_REQUEST_FLAG_BIAS_PULL_DOWN; break;
    default: break;
    }
    return flags;
}

/// gpiod_chip_open_by_label, gpiod_chip_get_line, gpiod_line_request: an input with both edge events
/// (output == 0) or an output driven to initial. NULL with errno set on failure (ENODEV: no such chip).
static inline void *hark_gpiod_request(
    const char *label, unsigned int offset, const char *consumer, int output, int bias, int active_low, int initial) {
    struct gpiod_chip *chip = gpiod_chip_open_by_label(label);
    if (!chip) { if (errno == ENOENT || errno == 0) errno = ENODEV; return NULL; }
    struct gpiod_line *line = gpiod_chip_get_line(chip, offset);
    struct gpiod_line_request_config config = {
        consumer, output ? GPIOD_LINE_REQUEST_DIRECTION_OUTPUT : GPIOD_LINE_REQUEST_EVENT_BOTH_EDGES,
        hark_gpiod_flags(bias, active_low)};
    if (!line || gpiod_line_request(line, &config, initial) != 0) {
        int saved = errno;
        gpiod_chip_close(chip);
        errno = saved;
        return NULL;
    }
    struct hark_gpiod_handle *handle = malloc(sizeof *handle);
    if (!handle) { gpiod_line_release(line); gpiod_chip_close(chip); errno = ENOMEM; return NULL; }
    handle->chip = chip;
    handle->line = line;
    return handle;
}
/// gpiod_line_release, gpiod_chip_close
static inline void hark_gpiod_release(void *opaque) {
    struct hark_gpiod_handle *handle = opaque;
    gpiod_line_release(handle->line);
    gpiod_chip_close(handle->chip);
    free(handle);
}
/// gpiod_line_get_value
static inline int hark_gpiod_get_value(void *opaque) {
    return gpiod_line_get_value(((struct hark_gpiod_handle *)opaque)->line);
}
/// gpiod_line_set_value
static inline int hark_gpiod_set_value(void *opaque, int value) {
    return gpiod_line_set_value(((struct hark_gpiod_handle *)opaque)->line, value);
}
/// gpiod_line_event_wait, then gpiod_line_event_read: 1 with the event, 0 on timeout, -1 with errno.
static inline int hark_gpiod_next_event(
    void *opaque, const struct timespec *timeout, int *rising, int64_t *timestamp_ns) {
    struct hark_gpiod_handle *handle = opaque;
    int ready = gpiod_line_event_wait(handle->line, timeout);
    if (ready <= 0) return ready;
    struct gpiod_line_event event;
    if (gpiod_line_event_read(handle->line, &event) != 0) return -1;
    *rising = event.event_type == GPIOD_LINE_EVENT_RISING_EDGE;
    *timestamp_ns = (int64_t)event.ts.tv_sec * 1000000000 + event.ts.tv_nsec;
    return 1;
}
#else
static inline int hark_gpiod_available(void) { return 0; }
static inline int hark_gpiod_flags(int bias, int active_low) { (void)bias; (void)active_low; return 0; }
static inline void *hark_gpiod_request(
    const char *label, unsigned int offset, const char *consumer, int output, int bias, int active_low, int initial) {
    (void)label; (void)offset; (void)consumer; (void)output; (void)bias; (void)active_low; (void)initial;
    errno = ENOTSUP;
    return NULL;
}
static inline void hark_gpiod_release(void *handle) { (void)handle; }
static inline int hark_gpiod_get_value(void *handle) { (void)handle; errno = ENOTSUP; return -1; }
static inline int hark_gpiod_set_value(void *handle, int value) {
    (void)handle; (void)value; errno = ENOTSUP; return -1;
}
static inline int hark_gpiod_next_event(
    void *handle, const struct timespec *timeout, int *rising, int64_t *timestamp_ns) {
    (void)handle; (void)timeout; (void)rising; (void)timestamp_ns; errno = ENOTSUP; return -1;
}
#endif

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
