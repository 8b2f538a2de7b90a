/* The Prometheus endpoint: a minimal HTTP/1.0 server on 127.0.0.1 that
 * answers GET /metrics with the text the caller's function produces.  Runs
 * in the thread-default main context; every client is bounded in size,
 * time and number. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define KSTALED_METRICS_MAX_REQUEST_LEN 8192
#define KSTALED_METRICS_MAX_CLIENTS 16
#define KSTALED_METRICS_TIMEOUT_S 5

typedef gchar *(*KstaledMetricsFunc) (gpointer user_data);

typedef struct _KstaledMetricsServer KstaledMetricsServer;

/* Listens on 127.0.0.1:@port (0: a free port, see _get_port). */
KstaledMetricsServer *kstaled_metrics_server_new (guint16 port,
                                                  KstaledMetricsFunc func,
                                                  gpointer user_data,
                                                  GError **error);
guint16 kstaled_metrics_server_get_port (KstaledMetricsServer *server);
void kstaled_metrics_server_free (KstaledMetricsServer *server);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (KstaledMetricsServer,
                               kstaled_metrics_server_free)

/* The whole HTTP response to @request (the bytes up to the blank line),
 * calling @func only for GET /metrics. */
GBytes *kstaled_metrics_respond (const char *request, gsize len,
                                 KstaledMetricsFunc func, gpointer user_data);

G_END_DECLS
