#ifndef LOCATIOND_CLIBXML2_H
#define LOCATIOND_CLIBXML2_H
/* libxml2 for reading GPX route files, loaded when the first GPX file is read rather than
 * linked: libxml2 brings ICU, zlib and liblzma, about 1 MB of resident memory in a daemon that
 * mostly never reads a GPX file. The headers come from libxml2-dev, reached through the link
 * include/libxml -> /usr/include/libxml2/libxml; the library is libxml2.so.2. */
#include <libxml/xmlversion.h>
/* Debian's libxml2 is built with ICU and its encoding.h then includes the system ICU headers,
 * whose types clash with the copy of ICU inside Foundation when a module sees both. locationd
 * never touches libxml2's ICU converters (it reads UTF-8 GPX), so hide them. */
#undef LIBXML_ICU_ENABLED
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xmlerror.h>

/* Loads libxml2 once (thread-safe). NULL when it is ready, otherwise why it is not. The other
 * calls below need a successful load first. */
const char *locationd_xml_load(void);

/* xmlReadMemory without an encoding (the document's own declaration decides). */
xmlDocPtr locationd_xml_read_memory(const char *buffer, int size, const char *url, int options);
xmlErrorPtr locationd_xml_last_error(void);
void locationd_xml_free_doc(xmlDocPtr document);
xmlNodePtr locationd_xml_root(xmlDocPtr document);
long locationd_xml_line(xmlNodePtr node);
/* xmlGetProp and xmlNodeGetContent: free the result with locationd_xml_free. */
xmlChar *locationd_xml_attribute(xmlNodePtr node, const char *name);
xmlChar *locationd_xml_content(xmlNodePtr node);
void locationd_xml_free(void *pointer);
#endif
