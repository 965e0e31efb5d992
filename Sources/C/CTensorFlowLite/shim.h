#ifndef HARK_CTENSORFLOWLITE_SHIM_H
#define HARK_CTENSORFLOWLITE_SHIM_H
// The one type of TensorFlow Lite's C API (tensorflow/lite/c/c_api_types.h) that Hark needs to declare a function
// pointer with: TfLiteTensorQuantizationParams returns this struct by value, which Swift can only call through a C
// type of the same layout. Nothing is linked: HarkWake opens libtensorflowlite_c.so with dlopen and looks the
// function up with dlsym.
#include <stdint.h>

// TfLiteQuantizationParams: a quantised value q stands for scale * (q - zero_point).
typedef struct {
    float scale;
    int32_t zero_point;
} HarkTfLiteQuantizationParams;

// TfLiteTensorQuantizationParams(const TfLiteTensor*), as a function pointer type.
typedef HarkTfLiteQuantizationParams (*HarkTfLiteTensorQuantizationParams)(const void *tensor);

#endif
