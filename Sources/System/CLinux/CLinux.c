/* Headers only; a C target needs one source file. */
#include "CLinux.h"
