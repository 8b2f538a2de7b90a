/* The Prometheus endpoint: a minimal HTTP/1.1 server that answers GET and
 * HEAD /metrics with the text the caller's function produces, and closes
 * every connection after one response (keep-alive is refused with
 * "Connection: close", as RFC 9112 allows).  Runs in the thread-default main
 * context; every client is bounded in size, number and total time, so a
 * client that sends or reads slowly cannot hold the endpoint. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define KSTALED_METRICS_MAX_REQUEST_LEN 8192
#define KSTALED_METRICS_MAX_CLIENTS 16
/* From accept to the last byte of the response; a scrape of the bounded
 * metrics takes milliseconds. */
#define KSTALED_METRICS_DEADLINE_MS 3000

typedef gchar *(*KstaledMetricsFunc) (gpointer user_data);

typedef struct _KstaledMetricsServer KstaledMetricsServer;

/* A token shorter than this is a mistake, not a secret. */
#define KSTALED_METRICS_MIN_TOKEN_LEN 16

/* Listens on @address (an IPv4 or IPv6 literal), @port (0: a free port, see
 * _get_port).  With a @token_file (NULL or empty: none), only requests with
 * "Authorization: Bearer TOKEN", TOKEN being the file's content without
 * surrounding white space, get the metrics. */
KstaledMetricsServer *kstaled_metrics_server_new (const char *address,
                                                  guint16 port,
                                                  const char *token_file,
                                                  KstaledMetricsFunc func,
                                                  gpointer user_data,
                                                  GError **error);
guint16 kstaled_metrics_server_get_port (KstaledMetricsServer *server);
/* http://ADDRESS:PORT/metrics, for the log. */
const char *kstaled_metrics_server_get_url (KstaledMetricsServer *server);
void kstaled_metrics_server_free (KstaledMetricsServer *server);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (KstaledMetricsServer,
                               kstaled_metrics_server_free)

/* The whole HTTP response to @request (the bytes up to the blank line),
 * calling @func only for GET or HEAD /metrics, with the bearer @token if it
 * is not NULL. */
GBytes *kstaled_metrics_respond (const char *request, gsize len,
                                 const char *token, KstaledMetricsFunc func,
                                 gpointer user_data);

G_END_DECLS
