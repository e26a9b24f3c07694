#ifndef LOCATIOND_CLIBXML2_SHIM_H
#define LOCATIOND_CLIBXML2_SHIM_H
/* libxml2 (Debian libxml2-dev) for reading GPX route files. */
#include <libxml/xmlversion.h>
/* Debian's libxml2 is built with ICU and its encoding.h then includes the system ICU headers,
 * whose types clash with the copy of ICU inside Foundation when a module sees both. locationd
 * never touches libxml2's ICU converters (it reads UTF-8 GPX), so hide them. */
#undef LIBXML_ICU_ENABLED
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xmlerror.h>

/* xmlFree is a function-pointer variable; call it through a function. */
static inline void locationd_xml_free(void *pointer) { xmlFree(pointer); }
#endif
