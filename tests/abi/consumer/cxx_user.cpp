// A C++ program using libaftp: it links only when the headers give the
// library's functions C linkage (extern "C").
#include <cstdio>

#include <aftp/aftp.h>

int main()
{
    std::printf("version %s\ncancelled %s\n", aftp_version_string(),
                aftp_strerror(AFTP_ERR_CANCELLED));
    return 0;
}
