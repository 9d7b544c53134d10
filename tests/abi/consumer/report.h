#ifndef CONSUMER_REPORT_H
#define CONSUMER_REPORT_H

/* Prints the version and AFTP_ERR_CANCELLED's text; 0 when both are right. */
int consumer_report(void);

#endif
