#ifndef HARK_CYAML_SHIM_H
#define HARK_CYAML_SHIM_H
// libyaml (Debian libyaml-dev): the YAML parser's event API, for the board and configuration files.
#include <yaml.h>
#endif
