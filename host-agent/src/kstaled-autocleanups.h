/* g_autoptr() support for the libvirt and json-c handles the agent holds.
 * libvirt and json-c release functions return int; the wrappers give
 * G_DEFINE_AUTOPTR_CLEANUP_FUNC the void signature it calls through. */
#pragma once

#include <glib.h>
#include <json-c/json.h>
#include <libvirt/libvirt.h>

static inline void
kstaled_vir_connect_unref (virConnectPtr conn)
{
  virConnectClose (conn);
}

static inline void
kstaled_vir_domain_unref (virDomainPtr dom)
{
  virDomainFree (dom);
}

static inline void
kstaled_json_object_unref (json_object *obj)
{
  json_object_put (obj);
}

static inline void
kstaled_json_tokener_free (json_tokener *tok)
{
  json_tokener_free (tok);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (virConnect, kstaled_vir_connect_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (virDomain, kstaled_vir_domain_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (json_object, kstaled_json_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (json_tokener, kstaled_json_tokener_free)
