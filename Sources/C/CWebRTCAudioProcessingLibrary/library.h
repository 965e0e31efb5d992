// webrtc-audio-processing (Debian libwebrtc-audio-processing-dev, 0.3.x) is C++ only: this module carries
// no declarations, only pkg-config's compiler flags and the link to the library, for the C++ shim
// CWebRTCAudioProcessing, whose C header is what Swift imports.
