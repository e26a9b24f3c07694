#ifndef LOCATIOND_CLIBXML2_SHIM_H
#define LOCATIOND_CLIBXML2_SHIM_H
/* libxml2 (Debian libxml2-dev) for reading GPX route files. */
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xmlerror.h>

/* xmlFree is a function-pointer variable; call it through a function. */
static inline void locationd_xml_free(void *pointer) { xmlFree(pointer); }
#endif
