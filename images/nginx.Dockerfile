# images/nginx.Dockerfile -- nginx:1.22 made from Debian 12's nginx, for
# machines that cannot pull the official image (scripts/images.sh builds it
# only when no nginx:1.22 is there). As in the official image, nginx is on
# PATH, /var/log/nginx/access.log and error.log go to the container's stdout
# and stderr, and curl is there for a healthcheck.
FROM debian:12
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nginx curl \
 && rm -rf /var/lib/apt/lists/* /etc/nginx/sites-enabled/default \
 && ln -sf /dev/stdout /var/log/nginx/access.log \
 && ln -sf /dev/stderr /var/log/nginx/error.log
EXPOSE 80
STOPSIGNAL SIGQUIT
CMD ["nginx", "-g", "daemon off;"]
