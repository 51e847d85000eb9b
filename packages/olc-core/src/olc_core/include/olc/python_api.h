/*
 * Importing olc-core's API table from a family's extension module.
 *
 * Include after Python.h. Call olc_import_core_api() once at module init;
 * it returns NULL with a Python ImportError set when olc-core is missing or
 * was built for another ABI version.
 */
#ifndef OLC_PYTHON_API_H_
#define OLC_PYTHON_API_H_

#include <Python.h>

#include "olc/kernel_abi.h"

static inline const olc_core_api* olc_import_core_api(void) {
  const olc_core_api* api =
      (const olc_core_api*)PyCapsule_Import(OLC_CORE_API_CAPSULE, 0);
  if (api == NULL) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_Format(PyExc_ImportError,
                 "olc: cannot import the olc-core API capsule '%s' "
                 "(is olc-core installed in this environment?)",
                 OLC_CORE_API_CAPSULE);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return NULL;
  }
  if (api->abi_version != OLC_ABI_VERSION) {
    PyErr_Format(PyExc_ImportError,
                 "olc: this extension was built for olc kernel ABI %u but the "
                 "installed olc-core provides ABI %u; rebuild or reinstall the "
                 "extension against the installed olc-core",
                 (unsigned)OLC_ABI_VERSION, (unsigned)api->abi_version);
    return NULL;
  }
  return api;
}

/* Wraps a vtable (with static storage duration) in the capsule that a
 * KernelRegistration takes as its factory. */
static inline PyObject* olc_kernel_capsule(const olc_kernel_vtable* vtable) {
  return PyCapsule_New((void*)vtable, OLC_KERNEL_VTABLE_CAPSULE, NULL);
}

#endif /* OLC_PYTHON_API_H_ */
