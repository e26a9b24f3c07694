/* Loading libxml2 on first use; see CLibXML2.h. */
#include "CLibXML2.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int loaded;
static char failure[512];
static xmlDocPtr (*read_memory)(const char *, int, const char *, const char *, int);
static xmlErrorPtr (*get_last_error)(void);
static void (*free_doc)(xmlDocPtr);
static xmlNodePtr (*doc_get_root_element)(const xmlDoc *);
static long (*get_line_no)(const xmlNode *);
static xmlChar *(*get_prop)(const xmlNode *, const xmlChar *);
static xmlChar *(*node_get_content)(const xmlNode *);
static xmlFreeFunc *(*thread_free)(void); /* __xmlFree, in thread-enabled builds */
static xmlFreeFunc *global_free;          /* the xmlFree variable otherwise */
static void (*set_generic_error_func)(void *, xmlGenericErrorFunc);

/* libxml2 reports some errors (an encoding it cannot convert, "I/O error : encoder error")
 * through its generic error function, which XML_PARSE_NOERROR does not silence and which
 * writes to standard error by default: the daemon's log would get libxml2's lines beside its
 * own. The reader takes every error from xmlGetLastError instead. */
static void ignore_generic_error(void *context, const char *message, ...) {
  (void)context;
  (void)message;
}

static void resolve(void) {
  void *handle = dlopen("libxml2.so.2", RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) {
    snprintf(failure, sizeof failure, "libxml2 is not installed (%s): install libxml2 to read GPX files",
             dlerror());
    return;
  }
  read_memory = (xmlDocPtr(*)(const char *, int, const char *, const char *, int))dlsym(handle, "xmlReadMemory");
  get_last_error = (xmlErrorPtr(*)(void))dlsym(handle, "xmlGetLastError");
  free_doc = (void (*)(xmlDocPtr))dlsym(handle, "xmlFreeDoc");
  doc_get_root_element = (xmlNodePtr(*)(const xmlDoc *))dlsym(handle, "xmlDocGetRootElement");
  get_line_no = (long (*)(const xmlNode *))dlsym(handle, "xmlGetLineNo");
  get_prop = (xmlChar * (*)(const xmlNode *, const xmlChar *)) dlsym(handle, "xmlGetProp");
  node_get_content = (xmlChar * (*)(const xmlNode *)) dlsym(handle, "xmlNodeGetContent");
  thread_free = (xmlFreeFunc * (*)(void)) dlsym(handle, "__xmlFree");
  global_free = (xmlFreeFunc *)dlsym(handle, "xmlFree");
  set_generic_error_func = (void (*)(void *, xmlGenericErrorFunc))dlsym(handle, "xmlSetGenericErrorFunc");
  if (!read_memory || !set_generic_error_func || !get_last_error || !free_doc || !doc_get_root_element || !get_line_no ||
      !get_prop || !node_get_content || (!thread_free && !global_free)) {
    snprintf(failure, sizeof failure, "libxml2.so.2 lacks a function locationd uses");
    return;
  }
  loaded = 1;
}

const char *locationd_xml_load(void) {
  pthread_once(&once, resolve);
  return loaded ? NULL : failure;
}

xmlDocPtr locationd_xml_read_memory(const char *buffer, int size, const char *url, int options) {
  /* The generic error function is per thread in a thread-enabled libxml2: set it on the
   * thread that reads. */
  set_generic_error_func(NULL, ignore_generic_error);
  return read_memory(buffer, size, url, NULL, options);
}
xmlErrorPtr locationd_xml_last_error(void) { return get_last_error(); }
void locationd_xml_free_doc(xmlDocPtr document) { free_doc(document); }
xmlNodePtr locationd_xml_root(xmlDocPtr document) { return doc_get_root_element(document); }
long locationd_xml_line(xmlNodePtr node) { return get_line_no(node); }
xmlChar *locationd_xml_attribute(xmlNodePtr node, const char *name) {
  return get_prop(node, (const xmlChar *)name);
}
xmlChar *locationd_xml_content(xmlNodePtr node) { return node_get_content(node); }
void locationd_xml_free(void *pointer) {
  xmlFreeFunc *slot = thread_free ? thread_free() : global_free;
  (*slot)(pointer);
}
