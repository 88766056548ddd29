# The g2 agent image. No registry: `g2 image build` assembles rootfs/ from
# container/rootfs/ (passwd, group) and files on this machine (the static
# g2-agent, the pinned Claude Code binary and the libraries it links,
# busybox-static, bash-static, CA certificates) and sends this file with it
# as the build context. container/README.md lists the image's contents.
FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/bin:/bin \
    HOME=/home/node \
    SHELL=/bin/bash \
    DISABLE_AUTOUPDATER=1 \
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
WORKDIR /workspace/group
ENTRYPOINT ["/usr/local/bin/g2-agent", "run"]
